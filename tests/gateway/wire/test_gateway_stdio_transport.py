"""The gateway's stdio transport: the SDK's `stdio_server` with its reads and writes on the event
loop. Lines are what the SDK's text layer reads (UTF-8, bad bytes replaced, universal newlines,
the last line at EOF); a session is byte for byte the SDK's own, with no worker thread; a side
that is not a pipe is served as the SDK serves it; EOF ends the server cleanly."""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import cast

import anyio
import pytest
from _gateway_rig import FIXTURES
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.gateway.wire.stdio import READ_CHUNK, PipeLines, PipeText

PROBE = FIXTURES / "stdio_probe.py"
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}')
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def call(rid: int, name: str, text: bytes = b"") -> bytes:
    return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s",'
            b'"arguments":{"text":"%s"}}}' % (rid, name.encode(), text))


class Chunks:
    """A stand-in for the pipe's StreamReader: `read` hands out the given chunks one by one."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def read(self, n: int) -> bytes:
        assert n == READ_CHUNK
        return self._chunks.pop(0) if self._chunks else b""


async def _lines(chunks: list[bytes]) -> list[str]:
    return [line async for line in PipeLines(cast(asyncio.StreamReader, Chunks(chunks)))]


PIECES = [b"a", b"{}", b" ", b"\n", b"\r", b"\r\n", "é".encode(), "€".encode(), "𝄞".encode(),
          b"\xff", b"\xe2\x82", b"\xf0\x9d", b"\x00"]


@settings(max_examples=examples(200), deadline=None)
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=40),
       cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=8))
def test_lines_are_what_the_sdk_text_layer_reads(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    # What `stdio_server` iterates: a UTF-8 TextIOWrapper, errors replaced, universal newlines.
    expected = list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace"))
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(edges)]
    assert asyncio.run(_lines(chunks)) == expected


def test_long_lines_cross_a_real_pipe_in_both_directions() -> None:
    long = "é€" * 150_000 + "x"  # 750 KB of UTF-8: many reads, and more than a pipe holds
    sent = [long + "\n", "short\r\n", "last without a newline"]

    async def run() -> list[str]:
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        reader = asyncio.StreamReader(loop=loop)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            open(r, "rb", buffering=0))  # noqa: SIM115 - the transport closes it
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
            open(w, "wb", buffering=0))  # noqa: SIM115
        out = PipeText(asyncio.StreamWriter(write_transport, protocol, None, loop))

        async def write() -> None:
            for text in sent:
                await out.write(text)
                await out.flush()
            write_transport.close()

        writing = asyncio.ensure_future(write())
        got = [line async for line in PipeLines(reader)]
        await writing
        read_transport.close()
        return got

    got = asyncio.run(asyncio.wait_for(run(), 60))
    assert got == [long + "\n", "short\n", "last without a newline"]


async def _session(mode: str) -> tuple[bytes, str, int | None]:
    """One interactive session with the probe (each answer awaited before the next request).
    A line that is not JSON-RPC is answered by ours (the SDK's stdio server leaves it
    unanswered, `malformed`): that answer is checked here and left out of the transcript."""
    async with await anyio.open_process([sys.executable, str(PROBE), mode],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out = BufferedByteReceiveStream(proc.stdout)

        async def ask(raw: bytes) -> bytes:
            assert proc.stdin is not None
            await proc.stdin.send(raw)
            return await out.receive_until(b"\n", 1 << 22) + b"\n"

        answers = [await ask(INIT + b"\r\n")]  # a CRLF line, as a Windows client writes
        await proc.stdin.send(INITIALIZED + b"\n" + b"this line is not JSON-RPC\n")
        if mode == "ours":
            refused = await out.receive_until(b"\n", 1 << 22)
            assert refused.startswith(b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700')
        answers.append(await ask(call(2, "echo", b"caf\xc3\xa9 \xff\xfe end") + b"\n"))
        answers.append(await ask(call(3, "stray") + b"\n"))
        answers.append(await ask(call(4, "echo", "ü".encode() * 200_000) + b"\n"))
        await proc.stdin.aclose()  # EOF: the server ends by itself
        with pytest.raises(anyio.EndOfStream):  # nothing more on the wire
            await out.receive()
        await proc.wait()
        err = b""
        with pytest.raises(anyio.EndOfStream):
            while True:
                err += await proc.stderr.receive()
        return b"".join(answers), err.decode(), proc.returncode


@pytest.mark.anyio
async def test_a_session_is_the_sdks_own_byte_for_byte_with_no_worker_thread() -> None:
    with anyio.fail_after(120):
        ours, ours_err, ours_rc = await _session("ours")
        sdk, sdk_err, sdk_rc = await _session("sdk")
    assert ours == sdk
    assert ours_rc == sdk_rc == 0
    assert "caf\u00e9 \ufffd\ufffd end".encode() in ours  # undecodable bytes replaced, as the SDK
    assert b"stray" not in ours  # a handler's print went to stderr, off the wire
    assert "stray output from a handler" in ours_err
    assert ours_err.rstrip().endswith("worker threads: 0")
    assert int(sdk_err.rstrip().rsplit(" ", 1)[1]) >= 10  # the counter sees the SDK's hops


@pytest.mark.anyio
async def test_a_side_that_is_not_a_pipe_is_served_as_the_sdk_serves_it(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(INIT + b"\n")  # initialize is answered before the next line is read
    answers: dict[str, bytes] = {}
    with anyio.fail_after(60):
        for mode in ("ours", "sdk"):
            out = tmp_path / f"{mode}.out"
            with requests.open("rb") as stdin, out.open("wb") as stdout:
                done = await anyio.run_process([sys.executable, str(PROBE), mode], stdin=stdin,
                                               stdout=stdout, check=False)
            assert done.returncode == 0, done.stderr
            assert b"worker threads: 0" not in done.stderr  # regular files: the SDK's threads
            answers[mode] = out.read_bytes()
    assert answers["ours"] == answers["sdk"]
    assert answers["ours"].startswith(b'{"jsonrpc":"2.0","id":1,"result":')
