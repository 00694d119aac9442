"""JWT checks against a real loopback JWKS endpoint that hangs: requests that need no key (a static
token's) are served meanwhile, the JWT requests hold no worker thread and share one fetch, which
ends at `jwksTimeout`; and `exp` is read as RFC 7519 writes it (a JSON number), with the
configured leeway honoured end to end (the SDK's middleware re-checks the AccessToken's expiry)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import jwt
import pytest
from _gateway_rig import World, text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gateway_auth import AUDIENCE, INIT, ISSUER, Keys, client, keys, serving  # noqa: F401

from _tiers import examples
from _waits import scaled
from byref.gateway.access.bearer import BearerVerifier
from byref.gateway.config.file import parse_config

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"


class Hanging:
    """A JWKS endpoint that holds every request until `release` (then answers the real set)."""

    def __init__(self, signing: Keys) -> None:
        self.keys = signing
        self.release = threading.Event()
        self.first = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = self.most = self.hits = 0


@pytest.fixture
def hanging() -> Iterator[tuple[Hanging, str]]:
    made = Hanging(Keys())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with made.lock:
                made.hits += 1
                made.in_flight += 1
                made.most = max(made.most, made.in_flight)
            made.first.set()
            try:
                if not made.release.wait(60):
                    return
                body = made.keys.jwks()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            finally:
                with made.lock:
                    made.in_flight -= 1

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield made, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    made.release.set()
    server.shutdown()
    server.server_close()
    thread.join(10)


def _options(jwks: str, **jwt_extra: Any) -> dict[str, Any]:
    return {"tokens": {ALICE: {"tenant": "acme", "principal": "alice"}},
            "jwt": {"issuer": ISSUER, "audience": AUDIENCE, "jwksUri": jwks, "tenant": "acme",
                    "jwksCooldown": 0, **jwt_extra}}


async def test_a_hanging_jwks_stalls_no_request_that_needs_no_key(
        world: World, hanging: tuple[Hanging, str]) -> None:
    made, jwks = hanging
    (world.files / "note.txt").write_text("alice's line\n" * 4_000)
    answered: list[str] = []
    with anyio.fail_after(scaled(120)):
        async with serving(world, world.need("filesystem"),
                           **_options(jwks, jwksTimeout=60)) as (_gateway, url), client(
                url, ALICE) as alice:
            read = await alice.call_tool("call_tool", {
                "name": "filesystem__read_text_file",
                "arguments": {"path": str(world.files / "note.txt")}})
            blob = json.loads(text(read))["value"]

            async def jwt_request(http: httpx2.AsyncClient) -> None:
                answer = await http.post(url, json=INIT, headers={
                    "Authorization": f"Bearer {made.keys.token()}",
                    "Accept": "application/json, text/event-stream"})
                answered.append(f"jwt {answer.status_code}")

            async with httpx2.AsyncClient(timeout=scaled(90)) as http, \
                    anyio.create_task_group() as group:
                for _ in range(45):
                    group.start_soon(jwt_request, http)
                assert await anyio.to_thread.run_sync(made.first.wait, 30)
                # The JWKS hangs with 45 JWT requests waiting on it; alice's read of her own
                # artifact (delivered in a worker thread) is served meanwhile.
                kept = await alice.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(world.files / "copy.txt"), "content": blob}})
                assert not kept.is_error, text(kept)
                answered.append("static")
                assert not made.release.is_set()
                made.release.set()
            assert answered[0] == "static"
            assert sorted(answered[1:]) == ["jwt 200"] * 45  # served once the keys arrived
            assert made.most == 1  # one fetch at a time, whatever the number waiting
    assert (world.files / "copy.txt").read_text() == "alice's line\n" * 4_000


async def test_jwt_checks_waiting_on_keys_hold_no_thread_and_end_at_the_timeout(
        hanging: tuple[Hanging, str]) -> None:
    made, jwks = hanging
    config = parse_config({"mcpServers": {"x": {"command": "true"}},
                           "byref": _options(jwks, jwksTimeout=1)}, source="test")
    verifier = BearerVerifier(config.tokens, config.jwt)
    assert verifier.jwt is not None
    answers: list[object] = []
    limiter = anyio.to_thread.current_default_thread_limiter()
    with anyio.fail_after(scaled(30)):
        async with anyio.create_task_group() as group:
            for _ in range(45):
                group.start_soon(_verify, verifier, made.keys.token(), answers)
            assert await anyio.to_thread.run_sync(made.first.wait, 10)
            assert limiter.borrowed_tokens == 0  # nobody waits in a worker thread
            assert await verifier.verify_token(ALICE) is not None  # needs no key: answered
    assert answers == [None] * 45  # refused once the fetch timed out
    assert verifier.jwt.refused == {"key": 45}
    assert made.hits == 1 and verifier.jwt.keys.last_error is not None


async def _verify(verifier: BearerVerifier, token: str, answers: list[object]) -> None:
    answers.append(await verifier.verify_token(token))


def _token(made: Keys, exp: Any) -> str:
    now = int(time.time())
    return jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "iat": now - 60,
                       "exp": exp}, made.private["k1"], algorithm="RS256",
                      headers={"kid": "k1"})


async def test_exp_is_a_number_and_the_leeway_holds_end_to_end(
        world: World, keys: tuple[Keys, str]) -> None:  # noqa: F811
    made, jwks = keys
    now = int(time.time())
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time"), **_options(jwks, leeway=30)) as (
                _gateway, url), httpx2.AsyncClient(timeout=scaled(30)) as http:
            for exp, status in ((now - 10, 200), (now - 60, 401), (str(now + 600), 401),
                                (True, 401), (now + 600, 200)):
                answer = await http.post(url, json=INIT, headers={
                    "Authorization": f"Bearer {_token(made, exp)}",
                    "Accept": "application/json, text/event-stream"})
                assert answer.status_code == status, (exp, answer.text)


@settings(max_examples=examples(40), deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-120, 120), leeway=st.sampled_from([0, 5, 30, 90]),
       as_text=st.booleans())
def test_exp_and_leeway_agree_between_the_verifier_and_the_sdk(
        keys: tuple[Keys, str], offset: int, leeway: int, as_text: bool) -> None:  # noqa: F811
    made, jwks = keys
    options = _options(jwks, leeway=leeway) if leeway else {
        **_options(jwks), "jwt": {**_options(jwks)["jwt"], "leeway": 0}}
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": options},
                          source="test")
    verifier = BearerVerifier(config.tokens, config.jwt)
    now = int(time.time())
    exp = now + offset
    found = anyio.run(verifier.verify_token, _token(made, str(exp) if as_text else exp))
    # RFC 7519: a NumericDate is a number; the token is accepted while now < exp + leeway.
    margin = 2  # seconds of this test's own clock around the check
    if as_text or offset <= -leeway - margin:
        assert found is None
    elif offset > -leeway + margin:
        assert found is not None and found.expires_at is not None
        # What the SDK's middleware checks (`expires_at < now` → 401) agrees with the leeway.
        assert found.expires_at >= int(time.time())
        assert found.expires_at == exp + leeway


async def test_keys_due_for_refresh_are_used_while_a_background_fetch_renews_them(
        keys: tuple[Keys, str]) -> None:  # noqa: F811
    from byref.gateway.access.jwks import LIFESPAN, REFRESH_AHEAD

    made, jwks = keys
    config = parse_config({"mcpServers": {"x": {"command": "true"}},
                           "byref": _options(jwks)}, source="test")
    with anyio.fail_after(scaled(30)):
        async with anyio.create_task_group() as group:
            verifier = BearerVerifier(config.tokens, config.jwt, spawn=group.start_soon)
            assert verifier.jwt is not None
            cache = verifier.jwt.keys
            assert await verifier.verify_token(made.token()) is not None
            assert made.fetches == 1
            # The set is past the refresh point: the request is answered from it at once, and
            # one background fetch renews it.
            cache._fetched = time.monotonic() - LIFESPAN * (REFRESH_AHEAD + 0.05)
            made.published = ["k1", "k2"]
            renewed = cache._fetched
            assert await verifier.verify_token(made.token()) is not None
        cache.spawn = None  # the group has ended: later fetches are the request's own
        assert made.fetches == 2 and cache._fetched is not None and cache._fetched > renewed
        assert await verifier.verify_token(made.token("k2")) is not None  # from the new set
        assert made.fetches == 2
        # A set past its life is not used: the next request waits for a fetch.
        cache._fetched = time.monotonic() - LIFESPAN - 1
        assert await verifier.verify_token(made.token()) is not None
        assert made.fetches == 3
