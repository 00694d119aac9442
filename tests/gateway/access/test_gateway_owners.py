"""Who owns a session, a conversation and a stored result over HTTP: a tenant, a principal and the
grant's restrictions, in the namespace of whoever vouched for it (a static token, or a JWT
issuer). A narrower grant of the same principal, or a JWT whose subject equals a static
principal, is another owner: every transport operation on a session (POST, the standalone GET
stream, DELETE) answers it 404, and it never reaches the owner's refs or /lens pages, unless the
config maps the JWT subject explicitly (`sameAs`)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from _gateway_rig import World, text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gateway_auth import INIT, ISSUER, Keys, client, keys, serving  # noqa: F401

from _tiers import examples
from _waits import scaled
from byref.gateway.config.auth import jwt_principal

pytestmark = pytest.mark.anyio

CAROL = "carol-token-0123456789abcdef"
TWIN = "carol-twin-token-0123456789ab"
"""Another token with exactly CAROL's grant: the same owner."""
CAROL_TIME = "carol-time-token-0123456789ab"
CAROL_TOOLS = "carol-tools-token-0123456789a"
DAVE = "dave-token-0123456789abcdef00"
TOKENS = {
    CAROL: {"tenant": "acme", "principal": "carol"},
    TWIN: {"tenant": "acme", "principal": "carol"},
    CAROL_TIME: {"tenant": "acme", "principal": "carol", "servers": ["time"]},
    CAROL_TOOLS: {"tenant": "acme", "principal": "carol", "tools": ["time__*"]},
    DAVE: {"tenant": "acme", "principal": "dave"},
}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def _options(jwks: str) -> dict[str, Any]:
    return {"tokens": TOKENS, "jwt": {
        "issuer": ISSUER, "audience": "byref-gateway", "jwksUri": jwks, "tenant": "acme",
        "jwksCooldown": 0, "sameAs": {"erin": "carol"}}}


def _tokens(made: Keys) -> dict[str, str]:
    """Name → bearer token: static grants and JWTs (carol: the issuer's own carol; erin: mapped
    to the static carol by `sameAs`)."""
    return {"carol": CAROL, "twin": TWIN, "carol-time": CAROL_TIME,
            "carol-tools": CAROL_TOOLS, "dave": DAVE, "jwt-carol": made.token(sub="carol"),
            "jwt-erin": made.token(sub="erin")}


SAME_OWNER = [{"carol", "twin", "jwt-erin"}]
"""Groups of names that are one owner; every other name is an owner of its own."""


def _owners_agree(a: str, b: str) -> bool:
    return a == b or any({a, b} <= group for group in SAME_OWNER)


def _auth(token: str, session: str | None = None) -> dict[str, str]:
    extra = {"mcp-session-id": session} if session else {}
    return {**HEADERS, "Authorization": f"Bearer {token}", **extra}


def _open(http: httpx2.Client, url: str, token: str) -> str:
    opened = http.post(url, json=INIT, headers=_auth(token))
    assert opened.status_code == 200, opened.text
    session: str = opened.headers["mcp-session-id"]
    ready = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                      headers=_auth(token, session))
    assert ready.status_code == 202, ready.text
    return session


def _operate(http: httpx2.Client, url: str, op: str, token: str, session: str) -> int:
    """One transport operation on `session` with `token`; its HTTP status."""
    if op == "post":
        return http.post(url, json=LISTING, headers=_auth(token, session)).status_code
    if op == "get":  # the standalone stream: only its status is read, then it is let go
        with http.stream("GET", url, headers=_auth(token, session)) as answer:
            return answer.status_code
    return http.delete(url, headers=_auth(token, session)).status_code


async def test_session_operations_are_refused_to_every_other_owner(
        world: World, keys: tuple[Keys, str]) -> None:  # noqa: F811 - the fixture
    made, jwks = keys
    tokens = _tokens(made)
    names = sorted(tokens)

    with anyio.fail_after(scaled(240)):
        async with serving(world, world.need("time"), **_options(jwks)) as (gateway, url):
            http = httpx2.Client(timeout=scaled(20))

            @settings(max_examples=examples(30), deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(owner=st.sampled_from(names), other=st.sampled_from(names),
                   op=st.sampled_from(["post", "get", "delete"]))
            def check(owner: str, other: str, op: str) -> None:
                session = _open(http, url, tokens[owner])
                status = _operate(http, url, op, tokens[other], session)
                if not _owners_agree(owner, other):
                    assert status == 404, (owner, other, op, status)
                    # Touching it first did not take it: the owner's next request is served.
                    mine = http.post(url, json=LISTING, headers=_auth(tokens[owner], session))
                    assert mine.status_code == 200 and '"search_tools"' in mine.text, mine.text
                    assert http.delete(url, headers=_auth(tokens[owner], session)
                                       ).status_code == 200
                else:
                    assert status == 200, (owner, other, op, status)
                    if op != "delete":
                        http.delete(url, headers=_auth(tokens[owner], session))

            try:
                await anyio.to_thread.run_sync(check)
            finally:
                http.close()
            assert gateway.upstreams["time"].starts <= 1


async def test_a_narrower_grant_cannot_take_or_shut_its_principals_session(
        world: World, keys: tuple[Keys, str]) -> None:  # noqa: F811 - the fixture
    _, jwks = keys
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time"), **_options(jwks)) as (gateway, url):
            async with httpx2.AsyncClient(timeout=scaled(20)) as http:
                opened = await http.post(url, json=INIT, headers=_auth(CAROL))
                session = opened.headers["mcp-session-id"]
                # The narrower token speaks first on the session: refused, and not its holder.
                for method in ("POST", "GET", "DELETE"):
                    answer = await http.request(
                        method, url, headers=_auth(CAROL_TIME, session),
                        json=LISTING if method == "POST" else None)
                    assert answer.status_code == 404, (method, answer.text)
                ready = await http.post(url, headers=_auth(CAROL, session), json={
                    "jsonrpc": "2.0", "method": "notifications/initialized"})
                assert ready.status_code == 202
                mine = await http.post(url, json=LISTING, headers=_auth(CAROL, session))
                assert mine.status_code == 200 and '"search_tools"' in mine.text
            assert [s.grant for s in gateway.scopes.all()] == [None]


async def test_a_jwt_subject_is_not_the_static_principal_of_the_same_name(
        world: World, keys: tuple[Keys, str]) -> None:  # noqa: F811 - the fixture
    made, jwks = keys
    servers = world.need("filesystem")
    (world.files / "note.txt").write_text("carol's line\n" * 4_000)
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, **_options(jwks)) as (gateway, url), client(
                url, CAROL) as static, client(url, made.token(sub="carol")) as issued, client(
                url, made.token(sub="erin")) as mapped:
            read = await static.call_tool("call_tool", {
                "name": "filesystem__read_text_file",
                "arguments": {"path": str(world.files / "note.txt")}})
            blob = json.loads(text(read))["value"]
            for who, caller in (("jwt-carol", issued), ("jwt-erin", mapped)):
                used = await caller.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(world.files / f"{who}.txt"), "content": blob}})
                assert used.is_error == (who == "jwt-carol"), (who, text(used))
            assert not (world.files / "jwt-carol.txt").exists()
            assert (world.files / "jwt-erin.txt").read_text() == "carol's line\n" * 4_000
            principals = {s.scope.principal for s in gateway.scopes.all()}
            assert principals == {"carol", jwt_principal(ISSUER, "carol")}
            # /lens: the issuer's carol sees none of the static carol's calls.
            base = url.removesuffix("/mcp")
            async with httpx2.AsyncClient(timeout=scaled(20)) as http:
                pages = {}
                for who, token in (("static", CAROL), ("jwt", made.token(sub="carol"))):
                    page = await http.get(f"{base}/lens/c/gateway/", headers={
                        "Authorization": f"Bearer {token}"})
                    assert page.status_code == 200
                    pages[who] = page.text
            assert "note.txt" in pages["static"] and "note.txt" not in pages["jwt"]
            assert "jwt-carol.txt" in pages["jwt"] and "jwt-carol.txt" not in pages["static"]


def test_a_static_principal_may_not_claim_a_jwt_namespace() -> None:
    from byref.gateway.config.file import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"starts with 'jwt:', which names a JWT issuer's"):
        parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {"tokens": {
            CAROL: {"tenant": "acme", "principal": jwt_principal(ISSUER, "carol")}}}},
            source="test")
