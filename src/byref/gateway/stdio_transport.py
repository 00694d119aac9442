"""The gateway's stdio transport: the SDK's `stdio_server`, its reads and writes on the event loop.

The SDK serves stdio through `anyio.wrap_file`, so every message crosses to a worker thread up to
three times (the line read, the write, the flush) and back. This module hands the SDK's own
`stdio_server` two file objects built on asyncio's pipe transports (`connect_read_pipe`,
`connect_write_pipe`), which read and write on the loop itself. Everything else stays the SDK's:
the claim of fds 0 and 1 (while serving, fd 0 reads the null device and fd 1 goes to stderr, so
children and stray prints miss the wire; both are restored on exit), the line framing, JSON-RPC
parsing (a line that is not JSON-RPC is an exception on the read stream), the context-carrying
memory streams handed to the session, and shutdown on EOF.

The law: the bytes are read exactly as the SDK's text layer reads them — UTF-8 with undecodable
bytes replaced, universal newlines (`\\r\\n` and `\\r` end a line like `\\n`), the last line at EOF
even without a newline — and written as strict UTF-8, one flushed line per message, waiting while
the reader is slow (no unbounded buffering). A side that is not a pipe, socket or terminal (a
regular file, say), an event loop that is not asyncio's, or an SDK without the pieces used here
falls back to the SDK's threaded text files, so the gateway serves wherever the SDK does.
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


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[Streams]:
    """`mcp.server.stdio.stdio_server()` with its stdin and stdout on the event loop."""
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
        stdin = await _reading(stack, stdin_buffer)
        stdout = await _writing(stack, stdout_buffer)
        async with stdio_server(stdin, stdout) as streams:
            yield streams


def _backend() -> str | None:
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


async def _reading(stack: AsyncExitStack, buffer: BinaryIO) -> anyio.AsyncFile[str]:
    pipe = _pipe(stack, buffer, "rb")
    if pipe is None:
        return anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8", errors="replace"))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    stack.callback(transport.close)
    # The SDK's reader uses only `async for` over its stdin; its writer only write and flush.
    return cast("anyio.AsyncFile[str]", PipeLines(reader))


async def _writing(stack: AsyncExitStack, buffer: BinaryIO) -> anyio.AsyncFile[str]:
    pipe = _pipe(stack, buffer, "wb")
    if pipe is None:
        return anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8"))
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), pipe)
    stack.callback(transport.close)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return cast("anyio.AsyncFile[str]", PipeText(writer))


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

