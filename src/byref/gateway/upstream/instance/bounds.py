"""One operation on a live upstream connection, bounded in time, and the words for how it failed.

Owns `Live` (a connection while it lives: its client, the calls in flight on it, the process behind
it, and why it broke), `bounded` (one operation on it: its deadline is the server's timeout, and a
connection that breaks meanwhile cancels it) and `UpstreamError` with the words it carries
(`describe`, `exit_reason`, `first_line`). Starting, owning and restarting connections is
`connection`'s.

The law: an operation ends in its result or an `UpstreamError` whose text names the server and says
what happened (in full for the operator; for clients, `public`, only its class: never a configured
value or a server's own stderr) — the server refused it (a JSON-RPC error: the connection is kept),
it stopped or its connection broke (dropped: the next call starts it again), it hung past its
timeout (kept while it still answers a ping, else dropped) — never an exception that escapes into
the gateway. One cancel scope an operation: no watcher task is started per call.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.errors import OperatorError
from byref.gateway.upstream.instance.spawn import Spawned, SpawnError
from byref.gateway.upstream.modern.tasks import BOUND
from byref.gateway.wire.sdk_client import HTTP_ERROR_STANDIN

T = TypeVar("T")


class UpstreamError(OperatorError):
    """An upstream server could not answer. Its text is the operator's (it may quote what the
    server or a library said: its stderr, a header value httpx refused, a URL); `public` is what
    clients and models are shown: the server's name and the class of failure, never a configured
    value."""

    def __init__(self, detail: str, public: str) -> None:
        super().__init__(detail)
        self.public = public


@dataclass
class Live:
    """One upstream connection while it lives (its owning task ends it; a break cancels its
    calls)."""

    client: Client | None = None
    stop: anyio.Event = field(default_factory=anyio.Event)
    broken: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    reason: str | None = None
    said: str | None = None
    """`reason` as clients are told it: its class, without quoted words."""
    calls: set[anyio.CancelScope] = field(default_factory=set)
    """The scopes of the calls in flight: a connection that breaks cancels each of them."""
    spawned: Spawned | None = None
    """The process behind a stdio connection (its exit code and last stderr lines)."""

    def fail(self, reason: str, said: str) -> None:
        """Break the connection for `reason` (`said`: its class, for clients; the first reason
        given is the one kept)."""
        if not self.broken.is_set():
            self.reason, self.said = reason, said
        self.end()

    def end(self) -> None:
        """Mark the connection broken and cancel every call in flight on it."""
        self.broken.set()
        for scope in list(self.calls):
            scope.cancel()


async def bounded(name: str, timeout: float, live: Live, doing: str,
                  op: Callable[[Client], Awaitable[T]], *,
                  drop: Callable[[Live], Awaitable[None]],
                  redact: Callable[[str], str] = str,
                  status: Callable[[], str | None] = lambda: None) -> T:
    """`op` on server `name`'s live connection within `timeout` seconds; raises UpstreamError
    saying what happened otherwise (`doing` names the operation; `drop` forgets a connection
    that must be started again; `redact` takes configured values out of the server's words;
    `status`, the HTTP status a remote server last refused a request with, names it where the
    SDK's error does not)."""
    assert live.client is not None
    client = live.client
    outcome: list[T] = []
    failure: list[BaseException] = []
    # One cancel scope a call: its deadline is the timeout, and a connection that breaks
    # meanwhile cancels it (`Live.end`), so no watcher task is started per call.
    with anyio.move_on_after(timeout) as scope:
        live.calls.add(scope)
        bound = BOUND.set((scope, timeout))  # an upstream's task, polled, moves it on
        try:
            if live.broken.is_set():
                scope.cancel()
            outcome.append(await op(client))
        except (MCPError, anyio.BrokenResourceError, anyio.ClosedResourceError,
                OSError) as exc:
            failure.append(exc)
        finally:
            BOUND.reset(bound)
            live.calls.discard(scope)
    if outcome:
        return outcome[0]
    if failure:
        err = failure[0]
        if isinstance(err, MCPError) and err.error.code != types.CONNECTION_CLOSED:
            # The server answered with a JSON-RPC error: it is alive, the call was refused (its
            # words are its answer, cut to a bound and without any configured value they quote).
            words = err.error.message
            refused = status() if words == HTTP_ERROR_STANDIN else None
            if refused is not None:  # an HTTP refusal: the SDK's words name no status
                words = f"{words} ({refused})"
            raise UpstreamError(f"Server {name!r} refused {doing}: {said(words)}",
                                f"Server {name!r} refused {doing}: {said(redact(words))}")
        exited = await exit_reason(live.spawned)
        live.fail(exited or f"its connection closed ({describe(err)})",
                  exit_class(exited) if exited else "its connection closed")
        await drop(live)
        again = " It will be started again on the next call."
        raise UpstreamError(f"Server {name!r} stopped while {doing}: {live.reason}.{again}",
                            f"Server {name!r} stopped while {doing}: {live.said}.{again}")
    if live.broken.is_set():
        await drop(live)
        exited = await exit_reason(live.spawned)
        if exited is not None and (live.reason or "").startswith("its connection closed"):
            live.reason, live.said = exited, exit_class(exited)
        again = " It will be started again on the next call."
        raise UpstreamError(f"Server {name!r} failed while {doing}: {live.reason}.{again}",
                            f"Server {name!r} failed while {doing}: {live.said}.{again}")
    # Timed out. A server that still answers a ping keeps its connection; one that does not
    # is restarted on the next call.
    alive = False
    with anyio.move_on_after(min(5.0, timeout)), contextlib.suppress(Exception):
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await client.list_tools()  # 2026-07-28 has no ping; a listing is as light
        else:
            with warnings.catch_warnings():  # deprecated only for 2026-07-28 servers
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_ping()
        alive = True
    if not alive:
        why = f"it did not answer within {timeout:g} s and no longer answers a ping"
        live.fail(why, why)
        await drop(live)
    late = (f"Server {name!r} did not finish {doing} within {timeout:g} s"
            f"{'' if alive else '; it was stopped and will be started again'}.")
    raise UpstreamError(late, late)


async def exit_reason(spawned: Spawned | None) -> str | None:
    """'it exited with code N: <its last stderr lines>', if the process behind it has exited."""
    if spawned is None or spawned.pid is None:
        return None
    await spawned.settle()
    return spawned.reason()


def describe(exc: BaseException) -> str:
    """`exc` in a few words for the model (the first of a group's; a missing command named)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions
        return describe(inner[0]) if inner else type(exc).__name__
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, SpawnError):
        return str(exc)
    if isinstance(exc, FileNotFoundError):
        return f"the command {exc.filename!r} was not found" if exc.filename else str(exc)
    text = first_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def said(text: str, limit: int = 500) -> str:
    """A server's own error message, at most `limit` characters (it may echo what a client sent,
    a megabyte URI), saying how long it was when cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text):,} characters in all]"
def exit_class(exited: str) -> str:
    """'it exited with code 3' of 'it exited with code 3: <its stderr>' (the class, not the
    words: a server's stderr may quote its configuration)."""
    return exited.partition(": ")[0]


def failure_class(exc: BaseException) -> str:
    """`exc` as the class of failure a client is told: its kind, never its text (which may quote
    a configured value: httpx quotes a header value it refuses)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions
        return failure_class(inner[0]) if inner else "its connection failed"
    if isinstance(exc, SpawnError):
        return exc.kind
    if isinstance(exc, FileNotFoundError):
        return "its command was not found"
    if isinstance(exc, PermissionError):
        return "its command could not be run (permission denied)"
    if isinstance(exc, MCPError):
        return f"it answered with an MCP error ({exc.error.code})"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return f"it answered HTTP {status}"
    return f"its connection failed ({type(exc).__name__})"


def first_line(text: str) -> str:
    """The first two non-blank lines of `text` as one, at most 200 characters."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " ".join(lines[:2])[:200] if lines else ""
