"""The stdio lane (`lanes/stdio.py`) against the SDK's loop on the same kind of connection: byref's
own stdio streams over real pipes, one gateway served with the lane and one without, the official
client on both, in both protocol generations. Every kind of answer matches and the plain calls
took the lane; a malformed call, and a handler's failure, is the SDK's error; a call the client
cancels is never answered and the connection goes on; a call cut off by the end of input is
answered `CONNECTION_CLOSED` as the SDK's loop answers it; nothing is taken before the SDK's loop
has served a request."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, running
from mcp import Client
from mcp.shared.exceptions import MCPError
from test_gateway_fastpath import CASES, MODES, _media, _shape, malformed_call_errors

from _waits import scaled
from byref.gateway.core import Gateway
from byref.gateway.edge.lanes import fastpath
from byref.gateway.edge.lanes.stdio import StdioLane
from byref.gateway.edge.server import serve_streams
from byref.gateway.wire.stdio import (
    MessageReader,
    MessageWriter,
    PipeLines,
    parse_response_line,
)

pytestmark = pytest.mark.anyio


async def _ends() -> tuple[PipeLines, asyncio.StreamWriter]:
    """Both ends of a fresh pipe on the running loop: its lines and a writer."""
    loop = asyncio.get_running_loop()
    r, w = os.pipe()
    reader = asyncio.StreamReader(loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                 open(r, "rb", buffering=0))  # noqa: SIM115 - the transport's
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
        open(w, "wb", buffering=0))  # noqa: SIM115
    return PipeLines(reader), asyncio.StreamWriter(transport, protocol, None, loop)


class Wire:
    """A gateway served on pipes through byref's stdio streams; the client side as a transport."""

    def __init__(self, gateway: Gateway, lane: bool) -> None:
        self.gateway, self.lane = gateway, lane
        self.sent: list[dict[str, Any]] = []  # every line the server wrote, parsed

    @asynccontextmanager
    async def transport(self) -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
        """Serve the gateway for one client connection; yields the client's streams."""
        server_lines, to_server = await _ends()  # client -> server
        client_lines, to_client = await _ends()  # server -> client
        self.end_input = to_server.close
        writer = MessageWriter(to_client)
        real = writer._put
        assert real is not None

        async def tapped(data: bytes) -> None:
            self.sent.append(json.loads(data))
            await real(data)

        writer._put = tapped
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: serve_streams(self.gateway, MessageReader(server_lines),
                                                writer, lane=self.lane))
            try:
                yield (MessageReader(_ClientLines(client_lines), parse_response_line),
                       MessageWriter(to_server))
            finally:
                to_server.close()  # end of input: the server's loop ends
        to_client.close()


class _ClientLines(PipeLines):
    def __init__(self, lines: PipeLines) -> None:  # the client edge: "\n" only, as stdio_client
        self._inner = lines

    async def next_line(self) -> str | None:
        line = await self._inner.next_line()
        return None if line is None else line.rstrip("\n")


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ids of the requests the lane took."""
    ids: list[Any] = []
    real = StdioLane.take

    def counting(self: StdioLane, line: str) -> bool:
        took = real(self, line)
        if took:
            ids.append(json.loads(line)["id"])
        return took

    monkeypatch.setattr(StdioLane, "take", counting)
    return ids


@asynccontextmanager
async def _both(world: World, servers: dict[str, Any], mode: str
                ) -> AsyncIterator[tuple[Client, Client, Wire, Wire]]:
    async with running(world, servers) as (g1, _s1), running(world, servers) as (g2, _s2):
        lane, sdk = Wire(g1, lane=True), Wire(g2, lane=False)
        async with Client(lane.transport(), mode=mode) as a, \
                Client(sdk.transport(), mode=mode) as b:
            yield a, b, lane, sdk


@pytest.mark.parametrize("mode", MODES)
async def test_answers_match_the_sdks_loop_and_plain_calls_take_the_lane(
        world: World, mode: str, taken: list[Any]) -> None:
    with anyio.fail_after(scaled(120)):
        async with _both(world, {"media": _media()}, mode) as (a, b, _lane, _sdk):
            await a.list_tools()
            await b.list_tools()
            for name, arguments in CASES:
                got, want = await a.call_tool(name, arguments), await b.call_tool(name, arguments)
                assert _shape(got) == _shape(want), (name, arguments)
    assert len(taken) == len(CASES)  # every request was plain; rich answers too


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
async def test_a_malformed_call_is_the_sdks_error(world: World, mode: str,
                                                  taken: list[Any]) -> None:
    with anyio.fail_after(scaled(120)):
        async with _both(world, {"media": _media()}, mode) as (a, b, _lane, _sdk):
            await a.list_tools()
            errors = await malformed_call_errors(a, b)
            assert errors[0] == errors[1]
    assert taken == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("failure", [MCPError(-32042, "no such scope", {"why": "test"}),
                                     RuntimeError("boom")])
async def test_a_failing_handler_is_the_sdks_error(
        world: World, mode: str, failure: Exception, taken: list[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def failing(self: Any, ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
        raise failure

    monkeypatch.setattr(fastpath.PlainCalls, "answer", failing)
    with anyio.fail_after(scaled(120)):
        async with _both(world, {"media": _media()}, mode) as (a, b, lane, sdk):
            await a.list_tools()
            await b.list_tools()
            for client in (a, b):
                with pytest.raises(MCPError):
                    await client.call_tool("search_tools", {"query": "weather"})
    assert len(taken) == 1
    assert [m["error"] for m in lane.sent if "error" in m] == [
        m["error"] for m in sdk.sent if "error" in m]


def _hang(world: World) -> dict[str, Any]:
    return {"mis": world.fixture("misbehaving.py", timeout=scaled(60))}


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_call_is_never_answered_and_the_connection_goes_on(
        world: World, mode: str, taken: list[Any]) -> None:
    with anyio.fail_after(scaled(120)):
        async with _both(world, _hang(world), mode) as (a, b, lane, sdk):
            for client, wire in ((a, lane), (b, sdk)):
                await wire.gateway.toolbox()  # listed (a first list does not wait for them)
                await client.list_tools()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "mis__hang", {})
                    await _until_in_flight(wire.gateway)
                    tg.cancel_scope.cancel()  # the client sends notifications/cancelled
                echoed = await client.call_tool("mis__echo", {"text": "after"})
                assert "after" in echoed.content[0].text  # type: ignore[union-attr]
                await _until_in_flight(wire.gateway, calls=0)  # the hang call was cancelled
    assert len(taken) == 2  # the hang call and the echo took the lane
    for wire in (lane, sdk):
        answered = [m["id"] for m in wire.sent if "result" in m or "error" in m]
        assert taken[0] not in answered, answered  # both clients number their requests alike
        assert len(answered) == len(set(answered)), answered
    assert ([m.get("method") for m in lane.sent if "id" not in m]
            == [m.get("method") for m in sdk.sent if "id" not in m])


async def _until_in_flight(gateway: Gateway, calls: int = 1) -> None:
    """Wait (bounded by the test's deadline) until `calls` client calls are in flight on the
    upstreams."""
    while sum(u.in_flight for u in gateway.upstreams.upstreams.values()) != calls:
        await anyio.sleep(0.01)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_cut_off_by_end_of_input_is_answered_connection_closed(
        world: World, mode: str, taken: list[Any]) -> None:
    errors: list[tuple[int, str]] = []
    with anyio.fail_after(scaled(120)):
        async with _both(world, _hang(world), mode) as (a, b, lane, sdk):
            for client, wire in ((a, lane), (b, sdk)):
                await wire.gateway.toolbox()  # listed (a first list does not wait for them)
                await client.list_tools()

                async def hang(client: Client = client) -> None:
                    with pytest.raises(MCPError) as raised:
                        await client.call_tool("mis__hang", {})
                    errors.append((raised.value.error.code, raised.value.error.message))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(hang)
                    await _until_in_flight(wire.gateway)
                    wire.end_input()
    assert len(taken) == 1
    assert errors == [(types.CONNECTION_CLOSED, "Connection closed")] * 2
