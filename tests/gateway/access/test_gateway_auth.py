"""HTTP auth as an OAuth 2.1 resource server: JWTs checked against a JWKS served on loopback
(keys generated here, rotated mid-test), refused — expired, wrong audience, wrong issuer,
unsigned, HS256 signed with the public key, an unknown key — with a 401 before any upstream
starts; static tokens written as sha-256 digests; grants that restrict servers and tools hold in
search_tools, activate_tool, call_tool and direct calls."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from _gateway_rig import World, served, text
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway import Gateway
from byref.gateway.access.bearer import BearerVerifier
from byref.gateway.config.auth import jwt_principal
from byref.gateway.config.file import ConfigError, parse_config

pytestmark = pytest.mark.anyio

ISSUER, AUDIENCE = "https://login.example.test/", "byref-gateway"
HASHED = "hashed-token-0123456789abcdef"
"""A static token the config knows only by its sha-256 digest."""
LIMITED = "limited-token-0123456789abcdef"
CAROL = 'jwt:["https://login.example.test/", "carol"]'
"""Who a JWT with `sub: carol` runs as: the issuer's carol, not a static token's."""


class Keys:
    """RSA keys made here and the JWKS a loopback server publishes (replaceable: rotation)."""

    def __init__(self) -> None:
        self.private = {kid: rsa.generate_private_key(public_exponent=65537, key_size=2048)
                        for kid in ("k1", "k2", "stranger")}
        self.published = ["k1"]
        self.fetches = 0

    def jwks(self) -> bytes:
        self.fetches += 1
        keys = []
        for kid in self.published:
            jwk = json.loads(RSAAlgorithm.to_jwk(self.private[kid].public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return json.dumps({"keys": keys}).encode()

    def token(self, kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "iat": now, "exp": now + 600,
                **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.private[kid], algorithm=alg, headers={"kid": kid})


@pytest.fixture
def keys() -> Iterator[tuple[Keys, str]]:
    made = Keys()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = made.jwks()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield made, f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    server.shutdown()
    server.server_close()
    thread.join(10)


def _hs256(claims: dict[str, Any], secret: bytes) -> str:
    """An HS256 JWT made by hand (PyJWT refuses to sign with a key that looks public)."""
    def part(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    head = part(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = part(json.dumps(claims).encode())
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{part(mac)}"


def _options(jwks: str) -> dict[str, Any]:
    digest = hashlib.sha256(HASHED.encode()).hexdigest()
    return {
        "jwt": {"issuer": ISSUER, "audience": AUDIENCE, "jwksUri": jwks, "tenant": "acme",
                "jwksCooldown": 0},
        "tokens": {f"sha256:{digest}": {"tenant": "acme", "principal": "hashed"},
                   LIMITED: {"tenant": "acme", "principal": "limited", "servers": ["time"],
                             "tools": ["time__get_current_time"]}},
    }


def serving(world: World, servers: dict[str, Any], **options: Any
            ) -> AbstractAsyncContextManager[tuple[Gateway, str]]:
    return served(world, servers, **options)


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}


async def test_bad_jwts_are_refused_before_any_upstream_and_good_ones_served(
        world: World, keys: tuple[Keys, str]) -> None:
    made, jwks = keys
    now = int(time.time())
    bad = {
        "expired": made.token(exp=now - 3_600, iat=now - 7_200),
        "audience": made.token(aud="someone-else"),
        "issuer": made.token(iss="https://evil.example.test/"),
        "algorithm": jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "carol",
                                 "exp": now + 600}, None, algorithm="none"),
        "key": made.token(kid="stranger"),  # signed by a key the JWKS does not hold
        "claims": made.token(sub=None),
    }
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time"), **_options(jwks)) as (gateway, url):
            async with httpx2.AsyncClient(timeout=scaled(30)) as http:
                for reason, token in bad.items():
                    answer = await http.post(url, json=INIT, headers={
                        "Authorization": f"Bearer {token}",
                        "Accept": "application/json, text/event-stream"})
                    assert answer.status_code == 401, (reason, answer.text)
            assert gateway.upstreams["time"].starts == 0
            assert gateway.scopes.all() == []
            async with client(url, made.token()) as carol:
                result = await carol.call_tool("call_tool", {
                    "name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
                assert not result.is_error, text(result)
            assert [(s.scope.tenant, s.scope.principal) for s in gateway.scopes.all()] in (
                [], [("acme", CAROL)])


async def test_the_verifier_names_why_it_refused(keys: tuple[Keys, str]) -> None:
    made, jwks = keys
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": _options(jwks)},
                          source="test")
    verifier = BearerVerifier(config.tokens, config.jwt)
    assert verifier.jwt is not None
    now = int(time.time())
    public = made.private["k1"].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    cases = {
        "expired": made.token(exp=now - 3_600),
        "audience": made.token(aud="other"),
        "issuer": made.token(iss="https://other/"),
        "algorithm": _hs256({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now + 600},
                            public),  # the public key as an HMAC secret (alg confusion)
        "key": made.token(kid="stranger"),
        "malformed": "a.b.c",
    }
    for reason, token in cases.items():
        assert await verifier.verify_token(token) is None, reason
    assert dict(verifier.jwt.refused) == dict.fromkeys(cases, 1)
    good = await verifier.verify_token(made.token(sub="dave"))
    dave = jwt_principal(ISSUER, "dave")  # the issuer's subject, never a static principal
    assert good is not None and good.claims == {"tenant": "acme", "principal": dave}
    assert good.client_id == json.dumps(["acme", dave])


async def test_keys_rotate_without_a_restart(keys: tuple[Keys, str]) -> None:
    made, jwks = keys
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": _options(jwks)},
                          source="test")
    verifier = BearerVerifier(config.tokens, config.jwt)
    assert await verifier.verify_token(made.token("k1")) is not None
    made.published = ["k1", "k2"]  # the issuer adds its next key …
    assert await verifier.verify_token(made.token("k2")) is not None  # unknown kid: refetched
    made.published = ["k2"]  # … and retires the old one: the cached set (5 min) still has it
    assert await verifier.verify_token(made.token("k1")) is not None
    assert made.fetches == 2
    # The next refetch (here: a token naming a key nobody published) drops the retired key.
    assert await verifier.verify_token(made.token("stranger")) is None
    assert made.fetches == 3
    assert await verifier.verify_token(made.token("k2")) is not None
    assert await verifier.verify_token(made.token("k1")) is None


async def test_static_tokens_may_be_written_as_their_sha256(keys: tuple[Keys, str]) -> None:
    _made, jwks = keys
    options = _options(jwks)
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": options},
                          source="test")
    assert HASHED not in json.dumps(options)
    verifier = BearerVerifier(config.tokens, config.jwt)
    found = await verifier.verify_token(HASHED)
    assert found is not None and found.claims == {"tenant": "acme", "principal": "hashed"}
    assert await verifier.verify_token(HASHED + "x") is None
    assert await verifier.verify_token(hashlib.sha256(HASHED.encode()).hexdigest()) is None
    with pytest.raises(ConfigError, match=r"entry #1 starts with 'sha256:' but is not followed "
                                          r"by 64 hex digits"):
        parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {
            "tokens": {"sha256:abc": {"tenant": "a", "principal": "b"}}}}, source="test")


@pytest.mark.parametrize(("jwt_options", "message"), [
    ({"issuer": "i", "audience": "a", "jwksUri": "http://example.com/jwks", "tenant": "t"},
     "'jwksUri' must be https:// (http:// only on loopback)"),
    ({"issuer": "i", "audience": "a", "jwksUri": "https://x/jwks"},
     "needs exactly one of 'tenant'"),
    ({"issuer": "i", "audience": "a", "jwksUri": "https://x/jwks", "tenant": "t",
      "algorithms": ["HS256", "RS256"]}, "algorithms 'HS256' cannot be checked against a JWKS"),
    ({"audience": "a", "jwksUri": "https://x/jwks", "tenant": "t"}, "'issuer' is required"),
])
def test_jwt_config_errors_name_the_fix(jwt_options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {"jwt": jwt_options}},
                     source="test")


async def test_a_grant_restricts_servers_and_tools_everywhere(
        world: World, keys: tuple[Keys, str]) -> None:
    _made, jwks = keys
    servers = world.need("time", "git")
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers, **_options(jwks)) as (_gateway, url), client(
                url, LIMITED) as limited, client(url, HASHED) as full:
                found = json.loads(text(await limited.call_tool("search_tools", {
                    "query": "time timezone convert git log"})))
                names = {r["name"] for r in found["results"]}
                assert "time__get_current_time" in names
                assert not any(n.startswith("git__") or n == "time__convert_time"
                               for n in names), names
                everything = json.loads(text(await full.call_tool("search_tools", {
                    "query": "time timezone convert git log"})))
                assert {"git__git_log", "time__convert_time"} <= {
                    r["name"] for r in everything["results"]}
                for name in ("git__git_log", "time__convert_time"):
                    activated = await limited.call_tool("activate_tool", {"names": [name]})
                    assert activated.is_error, text(activated)
                    via = await limited.call_tool("call_tool", {"name": name, "arguments": {}})
                    assert via.is_error, text(via)
                    direct = await limited.call_tool(name, {})
                    assert direct.is_error, text(direct)
                    assert name not in {t.name for t in (await limited.list_tools()).tools}
                allowed = await limited.call_tool("call_tool", {
                    "name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
                assert not allowed.is_error, text(allowed)
