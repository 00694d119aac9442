"""The gateway's stdio transport: MCP messages read and written on the event loop, no task between.

The SDK serves stdio through `anyio.wrap_file`, so every message crosses to a worker thread up to
three times (the line read, the write, the flush) and back, and then through a reader or writer
task and a memory stream on each side. This module keeps the SDK's claim of fds 0 and 1 (while
serving, fd 0 reads the null device and fd 1 goes to stderr, so children and stray prints miss
the wire; both are restored on exit) and hands the SDK's server loop two streams of its own
`ReadStream`/`WriteStream` protocols built on asyncio's pipe transports (`connect_read_pipe`,
`connect_write_pipe`): receiving a message reads and parses its line right there, sending one
serializes and writes it right there. Two task hand-offs a request fewer than the SDK's
`stdio_server`, whose framing and parsing they repeat exactly (`jsonrpc_message_adapter`, a line
that is not JSON-RPC an exception on the read stream, `model_dump_json(by_alias=True,
exclude_unset=True)` plus a newline out, shutdown on EOF).

The law: the bytes are read exactly as the SDK's text layer reads them — UTF-8 with undecodable
bytes replaced, universal newlines (`\\r\\n` and `\\r` end a line like `\\n`), the last line at EOF
even without a newline — and written as strict UTF-8, one line per message in the order sent,
waiting while the reader is slow (no unbounded buffering); a write to a reader that went away
is a `BrokenResourceError`, as on the SDK's memory stream. A side that is not a pipe, socket or
terminal (a regular file, say), an event loop that is not asyncio's, or an SDK without the
pieces used here falls back to the SDK's `stdio_server` (threaded text files where needed), so
the gateway serves wherever the SDK does.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import io
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import BinaryIO, cast

import anyio
import mcp_types as types
import sniffio
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage

try:  # the SDK's own claim of fds 0 and 1, reused so the diversion is exactly the SDK's
    from mcp.server.stdio import (
        _claim_fd,
        _open_stdin_diversion,
        _open_stdout_diversion,
        _UnownedTextWrapper,
    )
except ImportError:  # pragma: no cover - an SDK that moved them: serve as the SDK does
    CLAIMS = False
else:
    CLAIMS = True

READ_CHUNK = 1 << 16
"""Bytes asked of the pipe at a time (a longer line is assembled from several reads)."""

Streams = tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]


class PipeLines:
    """Lines of UTF-8 text from a read pipe, as the SDK's text layer yields them, on the loop."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._decoder = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder("utf-8")(errors="replace"), translate=True)
        self._lines: deque[str] = deque()
        self._partial = ""
        self._eof = False

    async def readline(self) -> str:
        """The next line with its newline (the last one may lack it); "" at end of file."""
        while not self._lines:
            if self._eof:
                return ""
            chunk = await self._reader.read(READ_CHUNK)
            text = self._partial + self._decoder.decode(chunk, final=not chunk)
            *complete, self._partial = text.split("\n")
            self._lines.extend(line + "\n" for line in complete)
            if not chunk:
                self._eof = True
                if self._partial:
                    self._lines.append(self._partial)
                    self._partial = ""
        return self._lines.popleft()

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line

    async def aclose(self) -> None:
        """Nothing to release here: the pipe's owner closes it."""
        return None


class PipeText:
    """UTF-8 text written to a pipe: `write` hands the bytes to the transport, `flush` waits
    until the pipe has taken enough of them (the transport's high-water mark)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> int:
        """Hand the text's UTF-8 bytes to the transport; its length in characters."""
        self._writer.write(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        """Wait until the pipe has taken enough of what was written (the transport's high-water
        mark)."""
        await self._writer.drain()

    async def aclose(self) -> None:
        """Nothing to release here: the pipe's owner closes it."""
        return None


class MessageReader:
    """The SDK's `ReadStream` of session messages, each line read and parsed on receive."""

    def __init__(self, lines: PipeLines) -> None:
        self._lines = lines
        self._closed = False

    async def receive(self) -> SessionMessage | Exception:
        """The next message (or the exception its line raised when parsed); EndOfStream at EOF."""
        if self._closed:
            raise anyio.ClosedResourceError
        line = await self._lines.readline()
        if not line:
            raise anyio.EndOfStream
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:  # as the SDK's reader: the session sees what was wrong
            return exc
        return SessionMessage(message)

    def __aiter__(self) -> MessageReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """No more messages are read (the pipe itself is closed by its owner)."""
        self._closed = True

    async def __aenter__(self) -> MessageReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class MessageWriter:
    """The SDK's `WriteStream` of session messages, each written as one line on send."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        """Write one message as a line; wait while the pipe holds more than its high-water mark."""
        if self._closed:
            raise anyio.ClosedResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        try:
            if self._writer.transport.is_closing():
                raise BrokenPipeError("the reader closed its end")
            self._writer.write(data.encode("utf-8"))
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:  # the client went away
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """No more messages are sent (the pipe itself is closed by its owner)."""
        self._closed = True

    async def __aenter__(self) -> MessageWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[Streams]:
    """`mcp.server.stdio.stdio_server()`'s streams, read and written on the event loop."""
    if not CLAIMS or sys.platform == "win32" or _backend() != "asyncio":
        async with stdio_server() as streams:
            yield streams
        return
    async with AsyncExitStack() as stack:
        stdin_buffer, release_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
        if release_stdin is not None:
            stack.callback(release_stdin)
        stdout_buffer, release_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
        if release_stdout is not None:
            stack.callback(release_stdout)
        lines = await _reading(stack, stdin_buffer)
        writer = await _writing(stack, stdout_buffer)
        if lines is not None and writer is not None:
            yield MessageReader(lines), MessageWriter(writer)
            return
        # One side is not a pipe: the SDK's own loop, on whatever side is one.
        stdin = (anyio.wrap_file(_UnownedTextWrapper(stdin_buffer, encoding="utf-8",
                                                     errors="replace"))
                 if lines is None else cast("anyio.AsyncFile[str]", lines))
        stdout = (anyio.wrap_file(_UnownedTextWrapper(stdout_buffer, encoding="utf-8"))
                  if writer is None else cast("anyio.AsyncFile[str]", PipeText(writer)))
        async with stdio_server(stdin, stdout) as streams:
            yield streams


def _backend() -> str | None:
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


async def _reading(stack: AsyncExitStack, buffer: BinaryIO) -> PipeLines | None:
    pipe = _pipe(stack, buffer, "rb")
    if pipe is None:
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    stack.callback(transport.close)
    return PipeLines(reader)


async def _writing(stack: AsyncExitStack, buffer: BinaryIO) -> asyncio.StreamWriter | None:
    pipe = _pipe(stack, buffer, "wb")
    if pipe is None:
        return None
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), pipe)
    stack.callback(transport.close)
    return asyncio.StreamWriter(transport, protocol, None, loop)


def _pipe(stack: AsyncExitStack, buffer: BinaryIO, mode: str) -> BinaryIO | None:
    """An unbuffered file on `buffer`'s descriptor for an asyncio pipe transport, or None when
    the descriptor is not a pipe, socket or terminal. The transport closes this file, never the
    descriptor (the SDK's claim owns it), and the descriptor's blocking mode is put back."""
    try:
        fd = buffer.fileno()
        kind = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    if not (stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind) or stat.S_ISCHR(kind)):
        return None
    with contextlib.suppress(AttributeError, OSError, ValueError):
        buffer.flush()  # anything the SDK's side buffered before goes first
    blocking = os.get_blocking(fd)
    stack.callback(_set_blocking(fd, blocking))
    return cast(BinaryIO, open(fd, mode, buffering=0, closefd=False))


def _set_blocking(fd: int, blocking: bool) -> Callable[[], None]:
    def put_back() -> None:
        with contextlib.suppress(OSError):
            os.set_blocking(fd, blocking)
    return put_back

