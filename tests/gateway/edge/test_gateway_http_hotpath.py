"""The HTTP hot path: the SDK's `Mcp-Param-*` header check finds the called tool's schema by name
(never by running `tools/list` before a call), answers are one JSON body, and a tool-list change
still reaches clients of both protocol generations over HTTP."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from _gateway_rig import World, running, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import byref.gateway.edge.server as server_module
from _waits import scaled
from byref.gateway import Gateway, listen_socket, serve_http
from byref.gateway.edge.server import DeclaredSchemas

pytestmark = pytest.mark.anyio
TOKEN = "hot-path-token-0123456789abcdef"
ECHO = "flaky__echo"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}


@asynccontextmanager
async def serving(world: World, *, growing: bool = False
                  ) -> AsyncIterator[tuple[Gateway, str]]:
    """The gateway over HTTP in front of the misbehaving fixture (`growing`: and a server whose
    tool list grows on a call, `garden`)."""
    servers = {"flaky": world.fixture("misbehaving.py"),
               **({"garden": world.fixture("changing.py")} if growing else {})}
    tokens = {TOKEN: {"tenant": "t", "principal": "p"}}
    async with running(world, servers, tokens=tokens) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
            try:
                yield gateway, f"http://127.0.0.1:{port}/mcp"
            finally:
                group.cancel_scope.cancel()
        sock.close()


def client(url: str, **options: Any) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {TOKEN}"})), **options)


async def test_a_call_over_http_runs_no_listing(world: World,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with anyio.fail_after(scaled(60)):
        async with serving(world) as (gateway, url), client(url) as c:
            assert c.protocol_version == "2026-07-28"
            listings: list[int] = []
            real = gateway.declarations

            async def counting(state: Any, **kw: Any) -> list[dict[str, Any]]:
                listings.append(1)
                return await real(state, **kw)

            monkeypatch.setattr(gateway, "declarations", counting)
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert len(listings) == 1
            for n in range(5):
                got = await c.call_tool("call_tool", {"name": ECHO, "arguments": {"text": f"{n}"}})
                assert not got.is_error, text(got)
            assert len(listings) == 1  # the SDK's header check asked the lookup, not tools/list
            assert "call_tool" in listed


async def test_the_lookup_answers_what_the_listing_declares(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[DeclaredSchemas] = []

    class Recorded(DeclaredSchemas):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(server_module, "DeclaredSchemas", Recorded)
    with anyio.fail_after(scaled(60)):
        async with serving(world) as (gateway, url), client(url) as c:
            lookup = made[-1]  # the HTTP server's (the rig builds one of its own first)
            assert not (await c.call_tool(ECHO, {"text": "x"})).is_error
            listed = (await c.list_tools()).tools  # a 2026-07-28 list: the scaffolding alone
            assert ECHO not in {t.name for t in listed}
            for tool in listed:
                assert lookup(tool.name) == tool.input_schema, tool.name
            box = await gateway.toolbox()
            assert lookup(ECHO) == box.catalog.tool(ECHO).declaration()["input_schema"]
            assert lookup("flaky__crash") == box.catalog.tool("flaky__crash").declaration()[
                "input_schema"]  # by name, as MCPServer's lookup: not scoped to the caller
            assert lookup("no_such_tool") is None


async def test_an_answer_is_one_json_body(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with serving(world) as (_gateway, url), httpx2.AsyncClient() as http:
            answer = await http.post(url, json=INIT, headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream"})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"].startswith("application/json")
            assert answer.json()["result"]["serverInfo"]["name"] == "byref-gateway"


async def test_a_list_change_reaches_both_generations_over_http(world: World) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(scaled(60)):
        async with serving(world, growing=True) as (gateway, url):
            async with client(url, mode="legacy", message_handler=on_message) as legacy:
                assert legacy.protocol_version != "2026-07-28"
                await legacy.list_tools()
                got = await legacy.call_tool("activate_tool", {"names": [ECHO]})
                assert not got.is_error, text(got)
                await changed.wait()  # on the session's standing GET stream
                assert ECHO in {t.name for t in (await legacy.list_tools()).tools}
            async with client(url) as modern:
                assert modern.protocol_version == "2026-07-28"
                listed = (await modern.list_tools()).tools
                async with modern.listen(tools_list_changed=True) as subscription:
                    # Its own activation leaves its list as it was (the declaration is in the
                    # answer); an upstream's change is what it hears of.
                    got = await modern.call_tool("activate_tool", {"names": ["flaky__crash"]})
                    assert not got.is_error, text(got)
                    assert (await modern.list_tools(cache_mode="bypass")).tools == listed
                    grown = await modern.call_tool("call_tool", {"name": "garden__grow"})
                    assert text(grown) == "now 2 tools"
                    event = await subscription.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
                assert "garden__water_seedling_1" in (await gateway.toolbox()).catalog
