"""The HTTP lane (`lanes/http.py`) against the SDK's entry: two gateways over the same
upstream served over real HTTP, one with the lane and one without. The official client's answers
match in both protocol generations and the plain 2026-07-28 calls took the lane (a handshake-era
client never does); every malformed, refused or non-plain request is answered with the SDK's
status, headers and body (and not taken); a handler's failure is the SDK's error."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from _gateway_rig import World, running
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from test_gateway_fastpath import CASES, MODES, _media, _shape

from _waits import scaled
from byref.gateway import listen_socket, serve_http
from byref.gateway.edge.lanes import fastpath
from byref.gateway.edge.lanes import http as http_lane
from byref.gateway.edge.lanes.http import HttpLane

pytestmark = pytest.mark.anyio
TOKEN = "http-lane-token-0123456789abcdef"
TOKENS = {TOKEN: {"tenant": "t", "principal": "p"}}
MODERN = "2026-07-28"
ENVELOPE = {types.PROTOCOL_VERSION_META_KEY: MODERN,
            types.CLIENT_INFO_META_KEY: {"name": "probe", "version": "1"},
            types.CLIENT_CAPABILITIES_META_KEY: {}}
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": MODERN,
           "Mcp-Method": "tools/call"}


@pytest.fixture
def lanes(monkeypatch: pytest.MonkeyPatch) -> list[HttpLane]:
    """Every lane installed while the test runs (to count what each took)."""
    made: list[HttpLane] = []
    install = HttpLane.install.__func__  # type: ignore[attr-defined]

    def recording(cls: type[HttpLane], *args: Any) -> HttpLane | None:
        lane: HttpLane | None = install(cls, *args)
        if lane is not None:
            made.append(lane)
        return lane
    monkeypatch.setattr(http_lane.HttpLane, "install", classmethod(recording))
    return made


@asynccontextmanager
async def _served(world: World, lane: bool) -> AsyncIterator[str]:
    async with running(world, {"media": _media()}, tokens=TOKENS) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        port = sock.getsockname()[1]
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO(),
                                                lane=lane))
            try:
                yield f"http://127.0.0.1:{port}/mcp"
            finally:
                group.cancel_scope.cancel()
        sock.close()


@asynccontextmanager
async def _both(world: World) -> AsyncIterator[tuple[str, str]]:
    """(lane url, SDK url): two gateways over the media server."""
    async with _served(world, True) as fast, _served(world, False) as sdk:
        yield fast, sdk


def _client(url: str, mode: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)


@pytest.mark.parametrize("mode", MODES)
async def test_answers_match_the_sdks_entry_and_plain_calls_take_the_lane(
        world: World, mode: str, lanes: list[HttpLane]) -> None:
    with anyio.fail_after(scaled(120)):
        async with _both(world) as (fast, sdk), _client(fast, mode) as a, _client(sdk, mode) as b:
            assert len(lanes) == 1, lanes
            for name, args in CASES:
                got, want = await a.call_tool(name, args), await b.call_tool(name, args)
                assert _shape(got) == _shape(want), (name, args)
            assert (await a.list_tools()).tools == (await b.list_tools()).tools
    if mode == MODERN:
        assert lanes[0].taken >= 3, lanes[0].taken  # the text, stored and refused answers
    else:
        assert lanes[0].taken == 0, lanes[0].taken


def _call(params: Any, rid: Any = 7, **extra: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params, **extra}


ECHO = {"name": "call_tool", "arguments": {"name": "media__peek", "arguments": {}},
        "_meta": ENVELOPE}
BIG = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "' + (
    b"x" * (4 << 20)) + b'", "_meta": {}}}'
# (what is sent, extra or replaced headers (None drops one), HTTP method, whether the lane takes
# it: None where the SDK's checks decide): status, headers and body match the SDK's entry's.
RAW: list[tuple[Any, dict[str, str | None], str, bool | None]] = [
    (_call(ECHO), {}, "POST", True),  # plain: the lane's
    (_call(ECHO, rid="a-string-id"), {}, "POST", True),
    (_call(ECHO, rid=(1 << 63) - 1), {}, "POST", True),
    (_call({**ECHO, "name": "media__weather", "arguments": {"city": "Oslo"}}), {}, "POST", True),
    (_call({**ECHO, "name": "search_tools", "arguments": {"query": "weather"}}), {}, "POST", True),
    (_call({**ECHO, "name": "no_such_tool"}), {}, "POST", True),
    (_call({**ECHO, "arguments": []}), {}, "POST", False),  # malformed: the SDK's error
    (_call({**ECHO, "name": 3}), {}, "POST", False),
    (_call({**ECHO, "surplus": 1}), {}, "POST", False),
    (_call(ECHO, rid=True), {}, "POST", False),
    (_call(ECHO, rid=1.5), {}, "POST", False),
    (_call(ECHO, rid=None), {}, "POST", False),
    (_call(ECHO, rid=1 << 70), {}, "POST", False),
    (_call(ECHO, surplus="x"), {}, "POST", False),
    (_call(ECHO) | {"jsonrpc": "1.0"}, {}, "POST", False),
    (_call([ECHO]), {}, "POST", False),
    ([_call(ECHO)], {}, "POST", False),  # a batch
    ({k: v for k, v in _call(ECHO).items() if k != "id"}, {}, "POST", False),  # a notification
    (b"{not json", {}, "POST", False),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"n": NaN}}', {}, "POST",
     False),
    (BIG, {}, "POST", False),  # over the SDK's body limit: 413
    (_call({k: v for k, v in ECHO.items() if k != "_meta"}), {}, "POST", False),  # no envelope
    (_call({**ECHO, "_meta": {**ENVELOPE, "progressToken": 5}}), {}, "POST", False),
    (_call({**ECHO, "_meta": {**ENVELOPE, "traceparent": "00-" + "1" * 32 + "-" + "2" * 16
                                + "-01"}}), {}, "POST", False),
    (_call({**ECHO, "_meta": {**ENVELOPE, types.PROTOCOL_VERSION_META_KEY: "2025-11-25"}}), {},
     "POST", False),
    (_call({**ECHO, "_meta": {**ENVELOPE, types.CLIENT_INFO_META_KEY: 3}}), {}, "POST", None),
    (_call(ECHO), {"MCP-Protocol-Version": "2099-01-01"}, "POST", False),
    (_call(ECHO), {"Mcp-Method": "tools/list"}, "POST", False),
    (_call(ECHO), {"Mcp-Method": None}, "POST", False),
    (_call(ECHO), {"Mcp-Name": "something_else"}, "POST", False),
    (_call(ECHO), {"Mcp-Name": None}, "POST", False),
    (_call(ECHO), {"Mcp-Param-Name": "other"}, "POST", None),
    (_call(ECHO), {"Accept": "text/event-stream"}, "POST", False),
    (_call(ECHO), {"Content-Type": "text/plain"}, "POST", False),
    (_call(ECHO), {"Host": "evil.example:80"}, "POST", False),
    (_call(ECHO), {"Origin": "http://evil.example"}, "POST", False),
    (_call(ECHO), {"Authorization": None}, "POST", False),  # the SDK's 401, before either
    (_call(ECHO), {"Authorization": "Bearer not-the-token-0123456789"}, "POST", False),
    (_call(ECHO), {"MCP-Protocol-Version": None}, "POST", False),  # handshake era: no session
    (_call(ECHO), {"Mcp-Session-Id": "no-such-session"}, "POST", True),  # 2026-07-28: ignored
    (None, {}, "GET", False),
    (None, {}, "DELETE", False),
]


def _body(sent: Any) -> bytes | None:
    if sent is None or isinstance(sent, bytes):
        return sent
    return json.dumps(sent).encode()


async def _raw(http: httpx2.AsyncClient, url: str, sent: Any, headers: dict[str, str | None],
               method: str) -> tuple[int, dict[str, str], Any]:
    params = sent.get("params") if isinstance(sent, dict) else None
    named = {"Mcp-Name": params["name"]} if isinstance(params, dict) and isinstance(
        params.get("name"), str) else {}  # as the official client names the tool
    merged = {k: v for k, v in (HEADERS | named | headers).items() if v is not None}
    answer = await http.request(method, url, content=_body(sent), headers=merged)
    base = url.removesuffix("/mcp")  # each gateway names its own address (401's metadata URL)
    got = {k: v.replace(base, "BASE") for k, v in answer.headers.items() if k != "date"}
    if "mcp-session-id" in got:  # a fresh random id each
        got["mcp-session-id"] = str(len(got["mcp-session-id"]))
    try:
        body: Any = answer.json()
    except ValueError:
        body = answer.content
    if isinstance(body, dict) and isinstance(body.get("result"), dict):
        for block in body["result"].get("content", []):  # call ids and refs differ
            if isinstance(block, dict) and block.get("type") == "text":
                block["text"] = len(block["text"])
    return answer.status_code, got, body


async def test_every_raw_request_is_answered_as_the_sdks_entry_answers_it(
        world: World, lanes: list[HttpLane]) -> None:
    with anyio.fail_after(scaled(180)):
        async with _both(world) as (fast, sdk), httpx2.AsyncClient(timeout=scaled(60)) as http:
            for sent, headers, method, taken in RAW:
                before = lanes[0].taken
                got = await _raw(http, fast, sent, headers, method)
                want = await _raw(http, sdk, sent, headers, method)
                assert got == want, (str(sent)[:200], headers, method)
                took = lanes[0].taken - before
                assert taken is None or took == taken, (str(sent)[:200], headers, took)


@pytest.mark.parametrize("failure", [RuntimeError("boom"),
                                     MCPError(types.INVALID_PARAMS, "refused here")])
async def test_a_failing_handler_is_the_sdks_error(
        world: World, failure: Exception, lanes: list[HttpLane],
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def failing(self: Any, ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
        raise failure
    monkeypatch.setattr(fastpath.PlainCalls, "answer", failing)
    with anyio.fail_after(scaled(120)):
        async with _both(world) as (fast, sdk), httpx2.AsyncClient(timeout=scaled(60)) as http:
            got = await _raw(http, fast, _call(ECHO), {}, "POST")
            want = await _raw(http, sdk, _call(ECHO), {}, "POST")
    assert got == want
    assert got[0] != 200 or "error" in got[2], got
    assert lanes[0].taken == 1


async def test_a_connections_teardown_runs_as_the_sdks(
        world: World, lanes: list[HttpLane], monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    answer = fastpath.PlainCalls.answer

    async def pushing(self: Any, ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
        connection, before = self._connection(ctx), len(ran)
        connection.exit_stack.callback(ran.append, "torn down")
        out = await answer(self, ctx, name, arguments)
        assert len(ran) == before, ran  # not before the call is done
        return out
    monkeypatch.setattr(fastpath.PlainCalls, "answer", pushing)
    with anyio.fail_after(scaled(120)):
        async with _both(world) as (fast, sdk), httpx2.AsyncClient(timeout=scaled(60)) as http:
            got = await _raw(http, fast, _call(ECHO), {}, "POST")
            assert ran == ["torn down"] and lanes[0].taken == 1, (ran, lanes[0].taken)
            want = await _raw(http, sdk, _call(ECHO), {}, "POST")
            assert ran == ["torn down"] * 2, ran
    assert got == want


async def test_no_lane_where_the_app_is_not_the_sdks_shape(world: World) -> None:
    from starlette.applications import Starlette

    async with running(world, {"media": _media()}, tokens=TOKENS) as (_gateway, server):
        assert HttpLane.install(Starlette(), server, "/mcp") is None



async def test_an_sdk_without_the_lanes_internals_serves_every_call_its_own_way(
        world: World, monkeypatch: pytest.MonkeyPatch, lanes: list[HttpLane]) -> None:
    """The lane leans on the SDK's private HTTP entry helpers (imported in `wire.sdk_server`):
    when an SDK release moves them, the gateway still serves (no lane installed), it does not
    fail to start."""
    from byref.gateway.wire import bypass, sdk_server

    monkeypatch.setattr(sdk_server, "_HTTP_GAP", "mcp.server._streamable_http_modern (moved)")
    monkeypatch.setattr(bypass, "_reported", set())
    async with _served(world, True) as url, _client(url, MODES[-1]) as client:
        got = await client.call_tool("call_tool", {"name": "media__long_note"})
        assert not got.is_error
    assert lanes == []


@pytest.mark.parametrize(("header", "taken"), [("media__peek", 1), ("other", 0), (None, 0)])
async def test_an_annotated_schema_gets_the_sdks_header_check(
        world: World, lanes: list[HttpLane], monkeypatch: pytest.MonkeyPatch,
        header: str | None, taken: int) -> None:
    """The lane skips the SDK's `Mcp-Param-*` check only for a schema with no `x-mcp-header`
    annotation: where the declared schema has one, a header that is missing or disagrees with
    the body is the SDK's 400 on both paths, and a matching one is taken."""
    from byref.gateway.edge import server as server_module

    annotated = {"type": "object", "properties": {
        "name": {"type": "string", "x-mcp-header": "Tool"}, "arguments": {"type": "object"}}}
    declared = server_module.DeclaredSchemas.__call__

    def lookup(self: Any, name: str) -> Any:
        return annotated if name == "call_tool" else declared(self, name)
    monkeypatch.setattr(server_module.DeclaredSchemas, "__call__", lookup)
    with anyio.fail_after(scaled(120)):
        async with _both(world) as (fast, sdk), httpx2.AsyncClient(timeout=scaled(60)) as http:
            sent = _call(ECHO)
            got = await _raw(http, fast, sent, {"Mcp-Param-Tool": header}, "POST")
            want = await _raw(http, sdk, sent, {"Mcp-Param-Tool": header}, "POST")
    assert got == want
    assert (got[0] == 200) == (header == "media__peek"), got
    assert lanes[0].taken == taken


@pytest.mark.parametrize("path", ["/mcp/", "/healthz", "/elsewhere", "/MCP"])
async def test_a_call_to_another_path_is_the_stacks_to_answer(
        world: World, lanes: list[HttpLane], path: str) -> None:
    """The lane sits in front of the whole app: it takes only what the router sends to the MCP
    route, so a plain call posted anywhere else gets the SDK app's own answer (a redirect, the
    ops route's, a 404) and is not taken."""
    answers = []
    with anyio.fail_after(scaled(120)):
        async with _both(world) as urls, httpx2.AsyncClient(timeout=scaled(60)) as http:
            for url in urls:
                base = url.removesuffix("/mcp")
                status, headers, body = await _raw(http, base + path, _call(ECHO), {}, "POST")
                answers.append((status, {k: v.replace(base, "BASE") for k, v in headers.items()},
                                body))
    got, want = answers
    assert got == want
    assert got[0] != 200 or path == "/healthz", got
    assert lanes[0].taken == 0
