"""The HTTP auth handshake: a request without a valid token is answered 401 with a
`WWW-Authenticate` header naming the OAuth protected-resource metadata (RFC 9728), and that
document is served, so an MCP client shows "authorization needed", not a 404 parse error."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from _gateway_rig import World, running

from byref.gateway import Gateway, listen_socket, serve_http

pytestmark = pytest.mark.anyio
TOKEN = "alice-token-0123456789abcdef"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def serving(world: World, servers: dict[str, Any]) -> AsyncIterator[tuple[Gateway, int]]:
    tokens = {TOKEN: {"tenant": "acme", "principal": "alice"}}
    async with running(world, servers, tokens=tokens) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        port: int = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
            try:
                yield gateway, port
            finally:
                group.cancel_scope.cancel()
        sock.close()


async def test_401_names_the_protected_resource_metadata(world: World) -> None:
    with anyio.fail_after(60):
        async with serving(world, world.need("time")) as (gateway, port), httpx2.AsyncClient(
                timeout=30) as http:
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
            assert found["authorization_servers"] == [base]

            ok = await http.post(f"{base}/mcp", json=INIT, headers={
                **ACCEPT, "Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, ok.text
            assert gateway.upstreams["time"].starts == 0  # nothing started for a handshake
