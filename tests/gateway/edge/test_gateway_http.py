"""HTTP: every request needs a bearer token the config maps to a tenant and principal; a missing
or wrong token is refused before any upstream is touched; two tokens' refs never cross."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from _gateway_rig import World, running, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway import Gateway, Grant, listen_socket, serve_http

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef0000"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"}}


@asynccontextmanager
async def serving(world: World, servers: dict[str, Any]) -> AsyncIterator[tuple[Gateway, str]]:
    async with running(world, servers, tokens=TOKENS) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        announced = io.StringIO()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=announced))
            try:
                yield gateway, f"http://127.0.0.1:{port}/mcp"
            finally:
                group.cancel_scope.cancel()
        sock.close()
        assert announced.getvalue() == f"byref gateway listening on http://127.0.0.1:{port}/mcp\n"


def client(url: str, token: str | None, **options: Any) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers=headers)), **options)


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}


async def test_a_missing_or_wrong_token_is_refused_before_any_upstream(world: World) -> None:
    servers = world.need("time")
    with anyio.fail_after(scaled(60)):
        async with serving(world, servers) as (gateway, url):
            async with httpx2.AsyncClient() as http:
                for headers in ({}, {"Authorization": "Bearer not-a-token-of-this-gateway"},
                                {"Authorization": f"Basic {ALICE}"}):
                    answer = await http.post(url, json=INIT, headers={
                        **headers, "Accept": "application/json, text/event-stream"})
                    assert answer.status_code == 401, answer.text
            with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401
                async with client(url, "wrong-token-0123456789abcdef") as refused:
                    await refused.list_tools()
            assert gateway.upstreams["time"].starts == 0
            assert gateway.scopes.all() == []
            async with client(url, ALICE) as alice:
                result = await alice.call_tool("call_tool", {
                    "name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
                assert not result.is_error, text(result)
            assert gateway.upstreams["time"].starts == 1


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_tokens_refs_never_cross(world: World, mode: str) -> None:
    servers = world.need("filesystem")
    (world.files / "note.txt").write_text("secret line\n" * 4_000)
    with anyio.fail_after(scaled(60)):
        async with serving(world, servers) as (gateway, url), client(
                url, ALICE, mode=mode) as alice, client(url, BOB, mode=mode) as bob:
            read = await alice.call_tool("call_tool", {
                "name": "filesystem__read_text_file",
                "arguments": {"path": str(world.files / "note.txt")}})
            placed = json.loads(text(read))
            # Each session is its own conversation (a 2026-07-28 request has no session: its
            # principal's); either way one per token here.
            states = {(s.scope.tenant, s.scope.principal): s for s in gateway.scopes.all()}
            seq = states["acme", "alice"].transcript.last_seq
            blob, message = placed["value"], {"$ref": {"type": "Message", "seq": seq, "part": 0,
                                                       "field": "value"}}
            refusals = []
            for ref in (blob, message):
                stolen = await bob.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(world.files / "bob.txt"), "content": ref}})
                assert stolen.is_error
                refusals.append(text(stolen))
            assert not (world.files / "bob.txt").exists()
            assert refusals[0].startswith(
                f"Tool 'filesystem__write_file' could not complete: Artifact "
                f"{blob['$ref']['key']!r} is not available")
            # Alice's seq names nothing of Alice's in Bob's record (its wording depends on where
            # Bob's record began; test_gateway_restart pins it).
            assert refusals[1].startswith(
                f"Tool 'filesystem__write_file' could not complete: message {seq} ")
            assert "secret" not in refusals[1]
            for ref in (blob, message):
                kept = await alice.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(world.files / "alice.txt"), "content": ref}})
                assert not kept.is_error, text(kept)
                assert (world.files / "alice.txt").read_text() == "secret line\n" * 4_000
            scopes = sorted((s.scope.tenant, s.scope.principal) for s in gateway.scopes.all())
            assert scopes == [("acme", "alice"), ("acme", "bob")]
            conversations = {s.scope.conversation.split("-")[0] for s in gateway.scopes.all()}
            assert conversations == ({"session"} if mode == "legacy" else {"gateway"})


async def test_http_without_tokens_in_the_config_refuses_to_serve(world: World) -> None:
    from byref.gateway import http_app

    async with running(world, world.need("time")) as (gateway, _server):
        with pytest.raises(ValueError, match=r"^Config 'test' has no byref.tokens: over HTTP "):
            http_app(gateway)


SLASHED = {"slashed-tenant-token-0123456789": {"tenant": "a/b", "principal": "c"},
           "slashed-principal-token-012345": {"tenant": "a", "principal": "b/c"}}
"""Two grants whose tenant and principal, joined with '/', are the same string."""


async def test_a_session_answers_only_its_own_grant_even_when_joined_names_agree(
        world: World) -> None:
    (first, _), (second, _) = SLASHED.items()
    headers = {"Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    config = {"tokens": SLASHED}
    with anyio.fail_after(scaled(60)):
        async with running(world, world.need("time"), **config) as (gateway, _server):
            sock = listen_socket("127.0.0.1", 0)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
                async with httpx2.AsyncClient(timeout=scaled(30)) as http:
                    def auth(token: str, **extra: str) -> dict[str, str]:
                        return {**headers, "Authorization": f"Bearer {token}", **extra}

                    opened = await http.post(url, json=INIT, headers=auth(first))
                    assert opened.status_code == 200, opened.text
                    session = opened.headers["mcp-session-id"]
                    ready = await http.post(url, headers=auth(first, **{
                        "mcp-session-id": session}), json={
                        "jsonrpc": "2.0", "method": "notifications/initialized"})
                    assert ready.status_code == 202, ready.text
                    theirs = auth(second, **{"mcp-session-id": session})
                    used = await http.post(url, json=listing, headers=theirs)
                    assert used.status_code == 404, used.text
                    assert used.json()["error"]["message"] == "Session not found"
                    deleted = await http.delete(url, headers=theirs)
                    assert deleted.status_code == 404, deleted.text
                    mine = await http.post(url, json=listing, headers=auth(first, **{
                        "mcp-session-id": session}))
                    assert mine.status_code == 200 and '"search_tools"' in mine.text
                group.cancel_scope.cancel()
            sock.close()
            assert [(s.scope.tenant, s.scope.principal, s.scope.conversation)
                    for s in gateway.scopes.all()] == [("a/b", "c", f"session-{session}")]


def test_a_grant_is_its_own_session_owner() -> None:
    from byref.gateway.access.scopes import TokenMap

    tokens = {t: Grant(g["tenant"], g["principal"]) for t, g in SLASHED.items()}
    owners = [anyio.run(TokenMap(tokens).verify_token, t) for t in SLASHED]
    assert [o.client_id if o else None for o in owners] == ['["a/b", "c"]', '["a", "b/c"]']
