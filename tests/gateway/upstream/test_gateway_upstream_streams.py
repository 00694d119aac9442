"""The gateway's own streams on an upstream's pipes (`spawn.stdio_process`): what the session reads
from a server's stdout is item for item what the SDK's `stdio_client` gives it for the same bytes
(lines split on "\\n" only, a line that is not JSON-RPC an exception item with the SDK's own
message, an unfinished last line dropped), messages reach the server one line each in the order
sent, a long line arrives whole, and a write after the server has gone is a broken resource."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage

from _waits import scaled
from byref.gateway.upstream.instance.spawn import Spawned, live_groups, stdio_process

pytestmark = pytest.mark.anyio

# Writes argv[2] (hex, or @file) to stdout in the pieces argv[3..] say (each flushed alone); with
# argv[1] "echo" it then reads its stdin, echoing every line as a JSON-RPC notification carrying it.
WRITER = r"""
import json, sys
arg = sys.argv[2]
data = open(arg[1:], "rb").read() if arg.startswith("@") else bytes.fromhex(arg)
at = 0
for cut in [int(c) for c in sys.argv[3:]] + [len(data)]:
    sys.stdout.buffer.write(data[at:cut]); sys.stdout.buffer.flush(); at = max(at, cut)
for line in (sys.stdin if sys.argv[1] == "echo" else ()):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "echo", "params": {"l": line}})
                     + "\n")
    sys.stdout.flush()
"""

Item = tuple[str, ...]
Errors = Literal["strict", "ignore", "replace"]


def _params(data: bytes | Path, cuts: list[int], errors: Errors = "strict", *,
            mode: str = "once") -> StdioServerParameters:
    arg = f"@{data}" if isinstance(data, Path) else data.hex()
    return StdioServerParameters(command=sys.executable,
                                 args=["-c", WRITER, mode, arg, *map(str, sorted(cuts))],
                                 encoding_error_handler=errors)


def _item(item: SessionMessage | Exception) -> Item:
    if isinstance(item, Exception):
        return ("error", type(item).__name__, str(item))
    return ("message", item.message.model_dump_json(by_alias=True, exclude_unset=True))


async def _read_all(ours: bool, params: StdioServerParameters) -> list[Item]:
    """Every item the session would read, until the server's stdout ends."""
    transport = stdio_process(params, Spawned()) if ours else stdio_client(params)
    got: list[Item] = []
    with anyio.fail_after(scaled(20)):
        async with transport as (read, _write):
            while True:
                try:
                    got.append(_item(await read.receive()))
                except anyio.EndOfStream:
                    break
    return got


def _ok(rid: int) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"\xc3\xa9"}]}}'
            % rid)


PIECES = [_ok(1), _ok(2), b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
          b'{"progressToken":1,"progress":0.5}}', b"\n", b"\r\n", b"\r", b"", b" ",
          b"this is {not json-rpc", b'{"jsonrpc":"2.0"}', b"[]", b"null", "é€𝄞".encode()]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=12),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=4))
def test_a_servers_stdout_reads_item_for_item_as_the_sdks_stdio_client(
        pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)

    async def both() -> tuple[list[Item], list[Item]]:
        params = _params(data, cuts)
        return await _read_all(False, params), await _read_all(True, params)

    sdk, ours = anyio.run(both)
    assert ours == sdk


async def test_undecodable_bytes_are_handled_as_the_server_asked_as_in_the_sdk() -> None:
    data = _ok(1)[:-5] + b"\xff\xfe" + _ok(1)[-5:] + b"\n" + b"\xe2\x82\n" + _ok(2) + b"\n"
    for errors in ("replace", "ignore"):
        params = _params(data, [len(data) // 2], errors)  # type: ignore[arg-type]
        sdk, ours = await _read_all(False, params), await _read_all(True, params)
        assert ours == sdk
        assert [kind for kind, *_ in ours] == ["message", "error", "message"]


async def test_a_line_that_is_not_json_rpc_is_the_sdks_exception_and_reading_goes_on() -> None:
    data = _ok(1) + b"\nthis is {not json-rpc\n\n" + _ok(2) + b"\n" + _ok(3)  # 3 unfinished
    ours = await _read_all(True, _params(data, []))
    assert [item[0] for item in ours] == ["message", "error", "error", "message"]
    assert ours[1][1] == "ValidationError"
    assert "input_value='this is {not json-rpc'" in ours[1][2]
    assert "input_value=''" in ours[2][2]  # an empty line is parsed, as the SDK parses it
    assert '"id":2' in ours[3][1]


async def test_a_long_line_arrives_whole_and_messages_go_out_in_order(tmp_path: Path) -> None:
    big = "x" * (3 * 1024 * 1024 + 17)
    line = ('{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"'
            + big + '"}]}}\n').encode()
    (tmp_path / "line").write_bytes(line)
    spawned = Spawned()
    with anyio.fail_after(scaled(30)):
        params = _params(tmp_path / "line", [5, 70000, 200001], mode="echo")
        async with stdio_process(params, spawned) as (read, write):
            first = await read.receive()
            assert isinstance(first, SessionMessage)
            assert isinstance(first.message, types.JSONRPCResponse)
            assert first.message.result["content"][0]["text"] == big
            for rid in range(5):
                await write.send(SessionMessage(types.JSONRPCRequest(
                    jsonrpc="2.0", id=rid, method="tools/call", params={"name": "é", "n": rid})))
            echoed = []
            for _ in range(5):
                item = await read.receive()
                assert isinstance(item, SessionMessage)
                assert isinstance(item.message, types.JSONRPCNotification)
                assert item.message.params is not None
                echoed.append(item.message.params["l"])
            assert [types.jsonrpc_message_adapter.validate_json(e).id  # type: ignore[union-attr]
                    for e in echoed] == list(range(5))
            assert all(e.endswith("}\n") and '"\\u00e9"' not in e for e in echoed)
            assert spawned.pid in live_groups()
    assert spawned.pid not in live_groups()


async def test_writing_after_the_server_exited_is_a_broken_resource() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-c", "import os; os.close(0)"])
    spawned = Spawned()
    with anyio.fail_after(scaled(20)):
        async with stdio_process(params, spawned) as (read, write):
            with pytest.raises(anyio.EndOfStream):
                await read.receive()
            await spawned.settle()
            assert spawned.poll() == 0
            with pytest.raises(anyio.BrokenResourceError):
                for rid in range(50):  # the first may still land in the pipe's buffer
                    await write.send(SessionMessage(types.JSONRPCRequest(
                        jsonrpc="2.0", id=rid, method="ping")))
