"""The gateway's stdio message streams (`stdio_transport.MessageReader` / `MessageWriter`): a line
is parsed on receive (one that is not JSON-RPC is an exception on the stream, as in the SDK's
reader), EOF ends the stream, messages go out one line each in the order sent, and a write to a
reader that went away is `BrokenResourceError`, as on the SDK's memory stream."""

from __future__ import annotations

import asyncio
import os

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from byref.gateway.wire.stdio import MessageReader, MessageWriter, PipeLines


async def _pipe() -> tuple[MessageReader, MessageWriter, asyncio.BaseTransport,
                           asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    r, w = os.pipe()
    reader = asyncio.StreamReader(loop=loop)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
        open(r, "rb", buffering=0))  # noqa: SIM115 - the transport closes it
    write_transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
        open(w, "wb", buffering=0))  # noqa: SIM115
    return (MessageReader(PipeLines(reader)),
            MessageWriter(asyncio.StreamWriter(write_transport, protocol, None, loop)),
            read_transport, write_transport)


def _request(rid: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=rid, method="tools/call",
                                               params={"name": "echo", "arguments": {"t": "é"}}))


def test_messages_cross_in_order_and_a_bad_line_is_an_exception() -> None:
    async def run() -> list[SessionMessage | Exception]:
        reader, writer, read_t, write_t = await _pipe()
        for rid in range(3):
            await writer.send(_request(rid))
        write_t.get_extra_info("pipe").write(b"not json-rpc\n")  # type: ignore[attr-defined]
        await writer.send(_request(3))
        write_t.close()
        got = [m async for m in reader]
        read_t.close()
        return got

    got = asyncio.run(asyncio.wait_for(run(), 30))
    assert [m.message.id for m in got if isinstance(m, SessionMessage)] == [0, 1, 2, 3]
    assert isinstance(got[3], Exception)
    first = got[0]
    assert isinstance(first, SessionMessage)
    assert first.message == _request(0).message


def test_writing_to_a_reader_that_went_away_is_a_broken_resource() -> None:
    async def run() -> None:
        _reader, writer, read_t, write_t = await _pipe()
        read_t.close()  # the client closed its end
        await asyncio.sleep(0)  # one loop turn: the transport closes the descriptor
        with pytest.raises(anyio.BrokenResourceError):
            for rid in range(100):  # the first write may still land in the pipe's buffer
                await writer.send(_request(rid))
        await writer.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await writer.send(_request(0))
        write_t.close()

    asyncio.run(asyncio.wait_for(run(), 30))
