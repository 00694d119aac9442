"""The gateway's stdio transport: MCP messages read and written on the event loop, no task between.

The SDK serves stdio through `anyio.wrap_file` (every message crosses to a worker thread up to
three times, then a reader or writer task and a memory stream on each side). This module keeps the
SDK's claim of fds 0 and 1 (while serving, fd 0 reads the null device and fd 1 goes to stderr, so
children and stray prints miss the wire; both restored on exit) and hands the SDK's server loop
two streams of its own `ReadStream`/`WriteStream` protocols on asyncio's pipe transports: a
message is read and parsed, or serialized and written, right there — as the SDK's `stdio_server`
frames and parses it (`jsonrpc_message_adapter`, a line that is not JSON-RPC an exception on the
read stream, `model_dump_json(by_alias=True, exclude_unset=True)` plus a newline, EOF the end) —
except that a line the SDK would only log is answered here with the JSON-RPC error the spec names
(`malformed`), so a client never waits on a request that will not be served.

The same streams carry the client edge (`spawn.stdio_process`, an upstream the gateway starts):
there the lines are what the SDK's `stdio_client` parses (split on "\\n" only, in the server's
encoding and error handler, an unfinished last line dropped, a line that is not JSON-RPC logged
and handed to the session as an exception), so the SDK's `ClientSession` reads and writes the
child's pipes with no reader or writer task between.

The law: the bytes are read exactly as the SDK's text layer reads them — UTF-8 with undecodable
bytes replaced, universal newlines (`\\r\\n` and `\\r` end a line like `\\n`), the last line at EOF
even without a newline — and written as strict UTF-8, one line per message in the order sent,
waiting while the reader is slow (no unbounded buffering); a write to a reader that went away
is a `BrokenResourceError`, as on the SDK's memory stream. A side that is not a pipe, socket or
terminal (a regular file, /dev/null), an event loop that is not asyncio's, or an SDK without the
pieces used here falls back to the SDK's `stdio_server` (threaded text files where needed), so
the gateway serves wherever the SDK does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import BinaryIO, cast

import anyio
import mcp_types as types
import sniffio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from byref.errors import MisuseError
from byref.gateway.wire.front import Replay
from byref.gateway.wire.lines import READ_CHUNK as READ_CHUNK  # re-exported: their old home
from byref.gateway.wire.lines import ChunkSource as ChunkSource
from byref.gateway.wire.lines import PipeLines as PipeLines
from byref.gateway.wire.malformed import answers, hides_request
from byref.gateway.wire.sdk_client import asyncio_writer
from byref.gateway.wire.sdk_server import (
    STDIO_CLAIMS as CLAIMS,
)
from byref.gateway.wire.sdk_server import (
    ReadStream,
    WriteStream,
    _claim_fd,
    _open_stdin_diversion,
    _open_stdout_diversion,
    _UnownedTextWrapper,
)

logger = logging.getLogger(__name__)
Streams = tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]


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


def parse_request_line(line: str) -> SessionMessage | Exception:
    """A line from the client, parsed as the SDK's `stdio_server` parses it (what was wrong is
    handed to the session as a value)."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # as the SDK's reader: the session sees what was wrong
        return exc
    return SessionMessage(message)


def parse_response_line(line: str) -> SessionMessage | Exception:
    """A line from a server, parsed as the SDK's `stdio_client` parses it: a ValueError (not
    JSON, not JSON-RPC) is logged and handed to the session as a value; the session gives it to
    its message handler."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        logger.exception("Failed to parse JSONRPC message from server")
        return exc
    return SessionMessage(message)


class MessageReader:
    """The SDK's `ReadStream` of session messages, each line read and parsed on receive."""

    def __init__(self, lines: PipeLines,
                 parse: Callable[[str], SessionMessage | Exception] = parse_request_line, *,
                 refuse: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._lines = lines
        self._parse = parse
        self._refuse = refuse
        """Answers a line that did not parse (the server edge: `answer_malformed`); without it
        the session is handed the exception, as the SDK's reader does."""
        self._closed = False
        self._claim: Callable[[SessionMessage], bool] | None = None
        self._ended: Callable[[], None] | None = None
        self._take: Callable[[str], bool] | None = None
        self._drain: Callable[[], Awaitable[None]] | None = None

    def divert(self, claim: Callable[[SessionMessage], bool], ended: Callable[[], None]) -> None:
        """Offer every parsed message to `claim` first (one it takes never reaches the session)
        and call `ended` once the stream ends or is closed (`raw_calls`)."""
        self._claim, self._ended = claim, ended

    def screen(self, take: Callable[[str], bool], drain: Callable[[], Awaitable[None]]) -> None:
        """Offer every line to `take` before it is parsed (a line it takes never reaches the
        session) and await `drain` at end of input, before the session sees the end
        (`edge/lanes/stdio.py`)."""
        self._take, self._drain = take, drain

    async def receive(self) -> SessionMessage | Exception:
        """The next message (or the exception its line raised when parsed); EndOfStream at EOF."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                line = await self._lines.next_line()
            except (anyio.BrokenResourceError, ConnectionError) as exc:
                # The SDK's reader ends the stream on these: the session sees the connection close.
                self._end()
                raise anyio.EndOfStream from exc
            if line is None:
                if self._drain is not None:
                    await self._drain()
                self._end()
                raise anyio.EndOfStream
            if self._take is not None and self._take(line):
                continue
            item = self._parse(line)
            if self._refuse is not None and (isinstance(item, Exception) or (
                    isinstance(item.message, types.JSONRPCNotification)
                    and hides_request(line))):
                await self._refuse(line)
                continue
            if self._claim is None or isinstance(item, Exception) or not self._claim(item):
                return item

    def _end(self) -> None:
        if self._ended is not None:
            self._ended()

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
        self._end()

    async def __aenter__(self) -> MessageReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class MessageWriter:
    """The SDK's `WriteStream` of session messages, each written as one line on send.

    Built on an asyncio `StreamWriter` (the server edge) or, through `MessageWriter.on`, on any
    coroutine that writes bytes and waits while the pipe is full (a child's stdin)."""

    def __init__(self, writer: asyncio.StreamWriter | None = None) -> None:
        self._put: Callable[[bytes], Awaitable[None]] | None = (
            None if writer is None else _stream_put(writer))
        self._encoding = "utf-8"
        self._errors = "strict"
        self._closed = False

    @classmethod
    def on(cls, put: Callable[[bytes], Awaitable[None]], *, encoding: str = "utf-8",
           errors: str = "strict") -> MessageWriter:
        """A writer whose lines go to `put`, encoded as `encoding` with `errors`.

        `put` being an anyio process stdin's `send` (a child's pipe), its asyncio stream is
        written directly: anyio's send yields to the loop after every write (a checkpoint),
        one loop turn per upstream call that buys nothing here (a closed pipe still fails)."""
        writer = cls()
        if (stream := asyncio_writer(put)) is not None:
            put = _stream_put(stream)
        writer._put, writer._encoding, writer._errors = put, encoding, errors
        return writer

    async def send(self, item: SessionMessage, /) -> None:
        """Write one message as a line; wait while the pipe holds more than its high-water mark."""
        await self.send_line(item.message.model_dump_json(by_alias=True, exclude_unset=True))

    async def send_json(self, data: bytes) -> None:
        """Write `data` (one JSON-RPC message as UTF-8, no newline) as a line."""
        if self._encoding != "utf-8":
            await self.send_line(data.decode("utf-8"))
            return
        if self._closed or self._put is None:
            raise anyio.ClosedResourceError
        try:
            await self._put(data + b"\n")
        except (ConnectionError, OSError) as exc:  # the reader went away
            raise anyio.BrokenResourceError from exc

    async def send_line(self, text: str) -> None:
        """Write `text` (one JSON-RPC message, no newline) as a line. Each line reaches the pipe in
        one write call, so lines of concurrent senders never interleave."""
        if self._closed or self._put is None:
            raise anyio.ClosedResourceError
        try:
            await self._put((text + "\n").encode(self._encoding, self._errors))
        except (ConnectionError, OSError) as exc:  # the reader went away
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        """No more messages are sent (the pipe itself is closed by its owner)."""
        self._closed = True

    async def __aenter__(self) -> MessageWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def stdio_streams(replay: Replay | None = None) -> AsyncIterator[Streams]:
    """`mcp.server.stdio.stdio_server()`'s streams, read and written on the event loop
    (`replay`: what `front` read and answered, read first; its answers not sent again)."""
    if not CLAIMS or sys.platform == "win32" or _backend() != "asyncio":
        if replay is not None:
            raise MisuseError("a stdio front's replay needs stdin and stdout on pipes, an "
                              "asyncio loop and the SDK pieces `wire.sdk_server` reads: serve "
                              "without one where `front.usable()` is false")
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
        gate = asyncio.Event()
        lines = await _reading(stack, stdin_buffer, replay, gate)
        writer = await _writing(stack, stdout_buffer)
        if lines is not None and writer is not None:
            out = MessageWriter(writer) if replay is None else ReplayWriter(writer, replay, gate)
            yield MessageReader(lines, refuse=answer_malformed(out)), out
            return
        if replay is not None:
            raise MisuseError("a stdio front's replay needs stdin and stdout on pipes: serve "
                              "without one where `front.usable()` is false")
        # One side is not a pipe: the SDK's own loop, on whatever side is one.
        stdin = (anyio.wrap_file(_UnownedTextWrapper(stdin_buffer, encoding="utf-8",
                                                     errors="replace"))
                 if lines is None else cast("anyio.AsyncFile[str]", lines))
        stdout = (anyio.wrap_file(_UnownedTextWrapper(stdout_buffer, encoding="utf-8"))
                  if writer is None else cast("anyio.AsyncFile[str]", PipeText(writer)))
        async with stdio_server(stdin, stdout) as streams:
            yield streams


REPLAY_WAIT = 60.0
"""Seconds the lines after a replayed head wait for the full gateway's answers to it (it always
answers; the bound only keeps a session from hanging on a bug)."""


class Replayed:
    """The bytes `front` read, then the pipe's: the lines after the replay's head wait until
    `gate` is set (the full gateway has answered the head's requests)."""

    def __init__(self, replay: Replay, pipe: ChunkSource, gate: asyncio.Event) -> None:
        self._head, self._tail, self._pipe, self._gate = replay.head, replay.tail, pipe, gate

    async def read(self, n: int, /) -> bytes:
        """Up to `n` bytes (the head and tail whole); b"" at end of file."""
        if self._head:
            head, self._head = self._head, b""
            return head
        if not self._gate.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._gate.wait(), REPLAY_WAIT)
        if self._tail:
            tail, self._tail = self._tail, b""
            return tail
        return await self._pipe.read(n)


class ReplayWriter(MessageWriter):
    """A `MessageWriter` that does not send the full gateway's answers to the requests `front`
    answered (it sets `gate` once all are seen); an answer that differs from the front's is
    logged (a recording out of date: `edge/front_answers.py`)."""

    def __init__(self, writer: asyncio.StreamWriter, replay: Replay, gate: asyncio.Event
                 ) -> None:
        super().__init__(writer)
        self._pending = list(replay.answered)
        self._gate = gate
        if not self._pending:
            gate.set()

    async def send(self, item: SessionMessage, /) -> None:
        """Write one message as a line, unless it answers a request the front answered."""
        message = item.message
        if self._pending and isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            for i, (rid, sent) in enumerate(self._pending):
                if type(rid) is type(message.id) and rid == message.id:
                    del self._pending[i]
                    if not self._pending:
                        self._gate.set()
                    self._check(sent, message)
                    return
        await super().send(item)

    @staticmethod
    def _check(sent: bytes, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        if b'"supportedVersions"' in sent:
            return  # a discover's answer changes as servers come up: the front's was the cold one
        full = json.loads(message.model_dump_json(by_alias=True, exclude_unset=True))
        if json.loads(sent) != full:
            logger.warning("the stdio front answered request %r unlike the full gateway; "
                           "re-record its answers (python -m byref.gateway.edge.front_answers)",
                           message.id)


def answer_malformed(writer: MessageWriter) -> Callable[[str], Awaitable[None]]:
    """What answers a client's line that is not a valid message, on `writer` (`malformed`)."""
    async def refuse(line: str) -> None:
        logger.debug("answering a malformed line of %d characters", len(line))
        for answer in answers(line):
            try:
                await writer.send_json(answer)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the client went away
    return refuse


def _stream_put(writer: asyncio.StreamWriter) -> Callable[[bytes], Awaitable[None]]:
    async def put(data: bytes) -> None:
        if writer.transport.is_closing():
            raise BrokenPipeError("the reader closed its end")
        writer.write(data)
        await writer.drain()
    return put


def _backend() -> str | None:
    try:
        return sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return None


async def _reading(stack: AsyncExitStack, buffer: BinaryIO, replay: Replay | None = None,
                   gate: asyncio.Event | None = None) -> PipeLines | None:
    pipe = _pipe(stack, buffer, "rb")
    if pipe is None:
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    stack.callback(transport.close)
    if replay is not None and gate is not None:
        return PipeLines(Replayed(replay, reader, gate))
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
    descriptor (the SDK's claim owns it), and the descriptor's blocking mode is put back.

    Of character devices only a terminal is taken: the others (/dev/null, /dev/zero) cannot be
    polled — asyncio's selector refuses them (PermissionError) and uvloop aborts the process —
    so they are read and written as files are."""
    try:
        fd = buffer.fileno()
        kind = os.fstat(fd).st_mode
        pollable = stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind) or (
            stat.S_ISCHR(kind) and os.isatty(fd))
    except (AttributeError, OSError, ValueError):
        return None
    if not pollable:
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

