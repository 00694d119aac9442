"""The HTTP auth handshake. With a JWT issuer configured, a request without a valid token is
answered 401 with a `WWW-Authenticate` header naming the OAuth protected-resource metadata
(RFC 9728), which names that issuer as the authorization server, so an MCP client shows
"authorization needed", not a 404 parse error. With static tokens only there is no
authorization server to name (issue 39.B: the gateway named itself, which has none, and Claude
Code said "Failed to connect"): a plain `Bearer` 401, and no metadata document."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from _gateway_rig import World, running

from _waits import scaled
from byref.gateway import Gateway, listen_socket, serve_http

pytestmark = pytest.mark.anyio
TOKEN = "alice-token-0123456789abcdef"
ISSUER = "https://login.example.test/"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def serving(world: World, servers: dict[str, Any],
                  **options: Any) -> AsyncIterator[tuple[Gateway, int]]:
    tokens = {TOKEN: {"tenant": "acme", "principal": "alice"}}
    async with running(world, servers, tokens=tokens, **options) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        port: int = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
            try:
                yield gateway, port
            finally:
                group.cancel_scope.cancel()
        sock.close()


async def test_401_with_static_tokens_names_no_authorization_server(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time")) as (gateway, port), httpx2.AsyncClient(
                timeout=scaled(30)) as http:
            base = f"http://127.0.0.1:{port}"
            missing = await http.post(f"{base}/mcp", json=INIT, headers=ACCEPT)
            assert missing.status_code == 401
            assert missing.headers["WWW-Authenticate"] == (
                'Bearer error="invalid_token", error_description="Authentication required"')
            wrong = await http.post(f"{base}/mcp", json=INIT, headers={
                **ACCEPT, "Authorization": "Bearer not-a-token-of-this-gateway"})
            assert wrong.status_code == 401
            assert "resource_metadata" not in wrong.headers["WWW-Authenticate"]
            for document in ("/.well-known/oauth-protected-resource/mcp",
                             "/.well-known/oauth-authorization-server"):
                assert (await http.get(f"{base}{document}")).status_code == 404, document

            ok = await http.post(f"{base}/mcp", json=INIT, headers={
                **ACCEPT, "Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, ok.text
            assert gateway.upstreams["time"].starts == 0  # nothing started for a handshake


async def test_401_with_a_jwt_issuer_names_the_protected_resource_metadata(
        world: World) -> None:
    jwt = {"issuer": ISSUER, "audience": "byref-gateway", "tenant": "acme",
           "jwksUri": "http://127.0.0.1:9/jwks.json"}  # never fetched: no JWT is presented
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time"), jwt=jwt) as (gateway, port), \
                httpx2.AsyncClient(timeout=scaled(30)) as http:
            base = f"http://127.0.0.1:{port}"
            metadata = f"{base}/.well-known/oauth-protected-resource/mcp"
            missing = await http.post(f"{base}/mcp", json=INIT, headers=ACCEPT)
            assert missing.status_code == 401
            assert missing.headers["WWW-Authenticate"] == (
                'Bearer error="invalid_token", error_description="Authentication required", '
                f'resource_metadata="{metadata}"')
            wrong = await http.post(f"{base}/mcp", json=INIT, headers={
                **ACCEPT, "Authorization": "Bearer not-a-token-of-this-gateway"})
            assert wrong.status_code == 401
            assert f'resource_metadata="{metadata}"' in wrong.headers["WWW-Authenticate"]

            document = await http.get(metadata)
            assert document.status_code == 200
            found = document.json()
            assert found["resource"] == f"{base}/mcp"
            assert found["authorization_servers"] == [ISSUER]

            ok = await http.post(f"{base}/mcp", json=INIT, headers={
                **ACCEPT, "Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, ok.text
            assert gateway.upstreams["time"].starts == 0  # nothing started for a handshake
