"""Upstream processes: each started in its own process group, its stderr kept, its group ended.

Owns the stdio transport to a server the gateway starts: the SDK's `stdio_client` framing and
shutdown, with what it does not give (the process and its stderr), and the session reading and
writing the pipes itself through `stdio_transport`'s streams (no reader or writer task and memory
stream between; the lines are item for item what `stdio_client` would give the session), shared
with byref's own plain `tools/call` requests (`raw_calls`, `Spawned.raw`). The law:
every process group the gateway starts is recorded until it is gone, and ended — SIGTERM to the
whole group, SIGKILL after a grace — when its connection closes, when a start is abandoned, and
(`end_all`) when the gateway itself is told to stop, and by the `warden` when the gateway dies
unannounced (SIGKILL), so no upstream or child of one in its group outlives the gateway; the last
lines a server wrote to stderr are kept (and still forwarded to the operator's log), so a server
that exits says why in its own words: "it exited with code 3: fatal: missing API key".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TextIO

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment

from byref.errors import OperatorError
from byref.gateway.upstream.instance import warden
from byref.gateway.upstream.instance.raw_calls import RawCalls
from byref.gateway.wire.sdk_client import TransportStreams
from byref.gateway.wire.stdio import (
    MessageReader,
    MessageWriter,
    PipeLines,
    parse_response_line,
)

TAIL_LINES = 3
"""Last stderr lines a failure reason quotes."""
TAIL_CHARS = 300
GRACE = 2.0
"""Seconds a server has to exit once its stdin closes, and a group between SIGTERM and SIGKILL."""
_LIVE_GROUPS: set[int] = set()
"""Process groups started and not yet seen gone (the leader's pid is the group id)."""


@dataclass
class Spawned:
    """What is known about one started process: its pid, exit code and last stderr lines."""

    pid: int | None = None
    returncode: int | None = None
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    stderr_done: anyio.Event = field(default_factory=anyio.Event)
    raw: RawCalls | None = None
    """byref's own plain `tools/call` requests on the pipes (`raw_calls`), while they are open."""
    _process: anyio.abc.Process | None = None

    def tail(self) -> str:
        """The last stderr lines, joined and cut to TAIL_CHARS (older text dropped)."""
        text = " / ".join(self.lines)
        return text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]

    def poll(self) -> int | None:
        """The exit code, or None while the process runs."""
        if self._process is not None and self.returncode is None:
            self.returncode = self._process.returncode
        return self.returncode

    async def settle(self, timeout: float = 1.0) -> None:
        """Wait (bounded) for the process to be reaped and its stderr read to the end."""
        with anyio.move_on_after(timeout):
            while self.poll() is None:
                await anyio.sleep(0.01)
            await self.stderr_done.wait()

    def reason(self) -> str | None:
        """'it exited with code 3: <last stderr lines>' once it has exited, else None."""
        code = self.poll()
        if code is None:
            return None
        said = self.tail()
        how = f"it was killed by signal {-code}" if code < 0 else f"it exited with code {code}"
        return f"{how}: {said}" if said else how


class SpawnError(OperatorError, OSError):
    """A server's process could not be started; the message names the command (or its cwd),
    `kind` says the class of failure without naming either (what clients are told)."""

    def __init__(self, message: str, kind: str = "it could not be started") -> None:
        super().__init__(message)
        self.kind = kind


def spawn_failure(exc: OSError, command: str, cwd: object) -> str:
    """Why `command` did not start, naming it: uvloop's errors name no file ("[Errno 2] No such
    file or directory")."""
    if isinstance(exc, FileNotFoundError | NotADirectoryError) and cwd is not None and not (
            os.path.isdir(str(cwd))):
        return f"its working directory {str(cwd)!r} does not exist"
    if isinstance(exc, FileNotFoundError):
        where = "" if os.sep in command else " on PATH"
        return f"the command {command!r} was not found{where}"
    if isinstance(exc, PermissionError):
        return f"the command {command!r} is not executable (permission denied)"
    return f"the command {command!r} could not be run: {exc.strerror or exc}"


def live_groups() -> frozenset[int]:
    """The process groups this process started and still tracks (not yet killed or seen to end)."""
    return frozenset(_LIVE_GROUPS)


def group_alive(pgid: int) -> bool:
    """Whether process group `pgid` still has a member."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_all() -> None:
    """SIGKILL every recorded group (the gateway is stopping; no grace is owed)."""
    for pgid in list(_LIVE_GROUPS):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _gone(pgid)


def _gone(pgid: int) -> None:
    """Group `pgid` was ended (or seen gone): no longer recorded, nor watched by the warden."""
    _LIVE_GROUPS.discard(pgid)
    warden.release(pgid)


async def end_group(pgid: int, grace: float = GRACE) -> None:
    """SIGTERM the group, SIGKILL what is left after `grace`; shielded, bounded."""
    with anyio.CancelScope(shield=True):
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            _gone(pgid)
            return
        except PermissionError:
            pass
        with anyio.move_on_after(grace):
            while group_alive(pgid):
                await anyio.sleep(0.01)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        _gone(pgid)


class _Chunks:
    """A child's stdout as `PipeLines` reads it: b"" at end of file or once it is closed."""

    def __init__(self, stream: anyio.abc.ByteReceiveStream) -> None:
        self._stream = stream

    async def read(self, n: int, /) -> bytes:
        try:
            return await self._stream.receive(n)
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""


async def _drain(stream: anyio.abc.ByteReceiveStream) -> None:
    # RuntimeError: a session still reading the pipe (it keeps it drained itself).
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError,
                  OSError, RuntimeError):
        while True:
            await stream.receive()


@asynccontextmanager
async def stdio_process(server: StdioServerParameters, spawned: Spawned, *,
                        errlog: TextIO | None = None) -> AsyncIterator[TransportStreams]:
    """The SDK's stdio transport on byref's streams, the process in `spawned`, its group ended on
    the way out."""
    try:
        process = await anyio.open_process(
            [server.command, *server.args], env=get_default_environment() | (server.env or {}),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=server.cwd, start_new_session=True)
    except OSError as exc:
        why = spawn_failure(exc, server.command, server.cwd)
        kind = ("its working directory does not exist" if "working directory" in why else
                "its command was not found" if isinstance(exc, FileNotFoundError) else
                "its command could not be run (permission denied)"
                if isinstance(exc, PermissionError) else "its command could not be run")
        raise SpawnError(why, kind) from None
    spawned.pid, spawned._process = process.pid, process
    _LIVE_GROUPS.add(process.pid)
    warden.watch(process.pid)
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = process.stdout, process.stdin
    # The session reads and parses a line of stdout on receive and writes a message to stdin on
    # send: no reader or writer task and no memory stream between the session and the pipes.
    read_stream = MessageReader(
        PipeLines(_Chunks(stdout), encoding=server.encoding,
                  errors=server.encoding_error_handler, universal=False),
        parse_response_line)
    write_stream = MessageWriter.on(stdin.send, encoding=server.encoding,
                                    errors=server.encoding_error_handler)
    # Responses to byref's own plain calls are taken off the reader; all else reaches the session.
    raw = spawned.raw = RawCalls(write_stream)
    read_stream.divert(raw.claim, raw.close)
    out = errlog if errlog is not None else sys.stderr

    async def stderr_reader() -> None:
        assert process.stderr is not None
        partial = ""
        try:
            async for chunk in TextReceiveStream(process.stderr, errors="replace"):
                # The operator still sees every line (never on stdout: that is the protocol).
                with suppress(Exception):
                    out.write(chunk)
                    out.flush()
                partial += chunk
                *done, partial = partial.split("\n")
                spawned.lines.extend(ln.strip() for ln in done if ln.strip())
                partial = partial[-TAIL_CHARS:]
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            if partial.strip():
                spawned.lines.append(partial.strip())
            spawned.stderr_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(stderr_reader)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                raw.close()
                await read_stream.aclose()
                await write_stream.aclose()
                # What the server still writes is read and dropped: one stuck writing a full
                # stdout pipe could not read its stdin's end and exit.
                group.start_soon(_drain, stdout)
                if process.stdin is not None:
                    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await process.stdin.aclose()
                with anyio.move_on_after(GRACE):
                    while process.returncode is None:
                        await anyio.sleep(0.01)
                # The whole group, even when the leader exited: a child it left behind (npx's
                # node, a wrapper's server) would otherwise be an orphan.
                await end_group(process.pid)
                with anyio.move_on_after(GRACE):
                    while process.returncode is None:
                        await anyio.sleep(0.01)
                spawned.poll()
                with anyio.move_on_after(0.5):
                    await spawned.stderr_done.wait()
            group.cancel_scope.cancel()
    with anyio.CancelScope(shield=True), anyio.move_on_after(GRACE), suppress(Exception):
        await process.aclose()
    await anyio.lowlevel.cancel_shielded_checkpoint()
