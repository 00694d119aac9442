"""Upstream MCP servers: started lazily, restarted after a crash, every call bounded in time.

Owns the connections to the servers in the config, through the official `mcp` client, each in the
protocol revision `era` picks for it (a plain `tools/call` on a stdio server through `raw_calls`,
on the same pipes, with the same outcomes). The law: an upstream failure — it cannot start, it
crashes mid-call, it hangs past its timeout, it writes a line that is not JSON-RPC — becomes an
`UpstreamError` whose text names the server and says what happened, never an exception that escapes
into the gateway; a broken connection is dropped and the next call starts the server again, so one
bad server never stops the others being served (one bounded operation and the words for each
failure: `upstream_bounds`). Each connection is owned by one task of the gateway's task group (the
SDK's client must be entered and left in the same task); calls from other tasks use it while it
lives. An `Upstream` is one process (or remote session) of a server; which clients share it is
`pool`'s.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from byref.gateway.config.secrets import redactor
from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream import era, raw_calls
from byref.gateway.upstream.bounds import (
    Live,
    UpstreamError,
    bounded,
    describe,
    exit_class,
    exit_reason,
    failure_class,
    first_line,
)
from byref.gateway.upstream.hints import Kept, hint_of
from byref.gateway.upstream.relay import CALLER, Relay, current
from byref.gateway.upstream.spawn import Spawned, stdio_process
from byref.gateway.upstream.watch import Watched, modern
from byref.gateway.wire.bypass import lanes_on
from byref.gateway.wire.sdk_client import create_mcp_http_client
from byref.refs import quote

log = logging.getLogger("byref.gateway")
T = TypeVar("T")

UPSTREAM_EVENT_BYTES = 1 << 30
"""The largest single answer (one SSE event) read from a streamable HTTP upstream. The SDK's
default, 1 MiB, made a server's larger result look like a lost connection; a gateway exists to
take such results below the context, so the bound only guards memory."""
START_RETRY_AFTER = 30.0
"""Seconds before a server that failed to start is tried again for a listing."""
LIST_READY = 1.0
"""Seconds a client's list waits for a server still starting before it is answered without it
(the server's part announced by a list change once it is up): Claude Code gives up on a list
after ~5 s, and a server may take far longer to start."""


class Upstream:
    """One process (or remote session) of a configured server: its (re)startable connection."""

    def __init__(self, config: ServerConfig, group: anyio.abc.TaskGroup, *,
                 on_change: Callable[[str], Awaitable[None]] | None = None,
                 errlog: TextIO | None = None) -> None:
        self.config = config
        self.name = config.name
        self._group = group
        self._on_change = on_change
        self._errlog = errlog
        self._live: Live | None = None
        self._lock = anyio.Lock()
        self.starts = 0
        self.failed_at: float | None = None
        self.last_error: str | None = None
        self._spawned: Spawned | None = None
        self.http_status: str | None = None
        """The last HTTP error status a remote server answered a request with ("HTTP 401
        Unauthorized"), at its start or on a call: the SDK reports it as "Server returned an
        error response" alone."""
        self.redact = redactor(config)
        """`text` without any value this server's entry configures (`config.secrets`)."""
        self.relay = Relay(config.name, config.roots)
        """The way back to the client whose request is in flight here (`relay`)."""
        self.starting = False
        """Whether a start is under way (it counts as live for the pool's caps)."""
        self.on_notice: Callable[[str, Any], Awaitable[None]] | None = None
        """Told (server, notification) of its resource and prompt notifications (`passthrough`)."""
        self._raw_lane = lanes_on()  # off: every call through the SDK's ClientSession
        self._warming: anyio.Event | None = None
        self._late: dict[str, Callable[[Client], Awaitable[None]]] = {}
        """What was answered without this server while it started, by what: told once it is up."""
        self.log_level: types.LoggingLevel | None = None
        """The log level its clients last asked for (`logging/setLevel`): sent at each start."""
        self.mode: era.Mode = era.first_mode(config)
        """How its connections start (`era`): `auto` once it refused the handshake."""
        self.tools_hint: Kept | None = None
        """The cache hint of its last tool list (`hints`; None: it gave none)."""
        self.watched = Watched(config.name)
        """Its resource URIs watched for updates, and how (`watch`)."""

    # -- public --------------------------------------------------------------------------------
    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists (following pagination); the cache hint its answer
        carried is kept (`tools_hint`)."""

        async def fetch(client: Client) -> list[types.Tool]:
            tools: list[types.Tool] = []
            pages: list[types.ListToolsResult] = []
            cursor: str | None = None
            for _ in range(100):  # a paginator that never ends cannot hang the gateway
                page = await client.list_tools(cursor=cursor)
                pages.append(page)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            hint = hint_of(pages)
            self.tools_hint = Kept(hint) if hint is not None else None
            return tools

        with self.relay.flight(current()):
            return await self._bounded("listing its tools", fetch)

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run `tool` on the server, bounded by its timeout, with the client's progress token and
        forwarded `_meta`; raises UpstreamError when the server cannot be reached, fails or times
        out."""
        caller = current()
        # The client's progress token and log opt-in carry on upstream; its progress comes back.
        progress = caller.progress if caller is not None and caller.progress_token is not None \
            else None

        async def run(client: Client) -> types.CallToolResult:
            meta = caller.forwarded_meta(modern=modern(client)) \
                if caller is not None else None
            raw = self._raw(client) if self._raw_lane and progress is None and not meta \
                else None
            if raw is not None and raw_calls.plain(client):
                result = await raw_calls.call_tool(raw, client, tool, arguments)
                if result is not None:
                    return result
            return await client.call_tool(tool, arguments, progress_callback=progress,
                                          meta=meta)  # type: ignore[arg-type]

        with self.relay.flight(caller):
            result = await self._bounded(f"running {tool!r}", run)
            await self.relay.drained(caller)
            return result

    async def ready(self, within: float, doing: str,
                    late: Callable[[Client], Awaitable[None]]) -> Client | None:
        """The live client if the server is up within `within` s, else None: its start (begun
        in the background if none is under way) goes on, and `late(client)` runs once it is up
        (one per `doing`, however many requests went without it)."""
        client = self.connected
        if client is not None:
            return client
        warming = self._warming
        if warming is None:
            warming = self._warming = anyio.Event()
            self._group.start_soon(self._warm, warming)
        with anyio.move_on_after(within):
            await warming.wait()
        client = self.connected
        if client is None:
            self._late[doing] = late
        return client

    async def _warm(self, warming: anyio.Event) -> None:
        try:
            with contextlib.suppress(UpstreamError):  # said to whoever asks it next
                await self._connected()
        finally:
            self._warming = None
            warming.set()
        client = self.connected
        if client is None:  # it failed: what went without it is told if a later start is up
            return
        late, self._late = self._late, {}
        for tell in late.values():
            with contextlib.suppress(Exception):  # a client gone meanwhile is not told
                await tell(client)

    async def request(self, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        """Any other operation on the connection, bounded and failing as a call does."""
        with self.relay.flight(current()):
            return await self._bounded(doing, op)

    async def set_level(self, level: types.LoggingLevel) -> None:
        """Log at `level` from now on: sent now if the server runs (bounded; a failure is the
        operator's), else at its start, and again at each restart. Never starts it."""
        self.log_level = level
        live = self._live
        if live is None or live.broken.is_set() or self.starting:
            return  # a start under way sends the level itself (`_connected`)
        with contextlib.suppress(UpstreamError):
            await self._bounded("setting its log level", _sends_level(level))

    async def watch(self, uri: str) -> None:
        """One more watcher of `uri`'s updates; the first asks the server for them
        (`Watched.subscribe`). Raises UpstreamError as a call does (the watcher not counted)."""
        if not self.watched.added(uri):
            return
        try:
            await self.request(f"subscribing to {quote(uri)}",
                               lambda client: self.watched.subscribe(client, uri))
        except BaseException:
            self.watched.removed(uri)
            raise

    async def unwatch(self, uri: str) -> None:
        """One watcher of `uri` fewer; after the last the server is told, if it runs (a new
        start asks for nothing). Never starts it; a failure is the operator's."""
        if not self.watched.removed(uri) or self.connected is None:
            return
        with contextlib.suppress(UpstreamError):
            await self.request(f"unsubscribing from {quote(uri)}",
                               lambda client: self.watched.unsubscribe(client, uri))

    async def _missed_updates(self, uris: frozenset[str]) -> None:
        """A resource listen stream was opened again: each URI it watches may have changed."""
        if self.on_notice is not None:
            for uri in sorted(uris):
                await self.on_notice(self.name, types.ResourceUpdatedNotification(
                    params=types.ResourceUpdatedNotificationParams(uri=uri)))

    @property
    def alive(self) -> bool:
        """Whether a process (or session) runs or is being started for this upstream."""
        live = self._live
        return self.starting or (live is not None and not live.broken.is_set())

    @property
    def busy(self) -> bool:
        """Whether an operation is in flight on it, or a client watches one of its resources
        (a busy upstream is never stopped as idle: its watchers would hear nothing more)."""
        live = self._live
        return self.relay.in_flight > 0 or (live is not None and bool(live.calls)) or \
            bool(self.watched.counts)

    @property
    def pid(self) -> int | None:
        """The process id of a running stdio upstream, else None."""
        live = self._live
        spawned = live.spawned if live is not None and not live.broken.is_set() else None
        return spawned.pid if spawned is not None else None

    @property
    def connected(self) -> Client | None:
        """The live connection's client, if the server is running now."""
        live = self._live
        return live.client if live is not None and not live.broken.is_set() else None

    def _raw(self, client: Client) -> raw_calls.RawCalls | None:
        """byref's own call path on `client`'s pipes: a stdio connection that is still live."""
        live = self._live
        if live is None or live.client is not client or live.broken.is_set() \
                or live.spawned is None:
            return None
        raw = live.spawned.raw
        return raw if raw is not None and raw.open else None

    async def close(self) -> None:
        """Stop the connection and wait for it to end (at most 10 s)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop.set()
            with anyio.move_on_after(10, shield=True):
                await live.done.wait()

    # -- the connection ------------------------------------------------------------------------
    async def _bounded(self, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        try:
            live = self._live
            if live is None or live.broken.is_set():
                live = await self._connected()
            return await bounded(self.name, self.config.timeout, live, doing, op,
                                 drop=self._drop, redact=self.redact,
                                 status=lambda: self.http_status)
        except UpstreamError as exc:  # the operator is told in full; clients only `public`
            log.warning("upstream %r: %s", self.name, exc)
            raise

    async def _connected(self) -> Live:
        async with self._lock:
            live = self._live
            if live is not None and not live.broken.is_set():
                return live
            if live is not None:
                await self._drop(live)
            self.starting = True
            try:
                started = await self._start()
            except TimeoutError:
                said = self._spawned.tail() if self._spawned is not None else ""
                hung = f"it did not complete the MCP handshake within {self.config.timeout:g} s"
                self._failed(hung + (f"; its stderr: {said}" if said else ""), hung)
            except Exception as exc:  # whatever starting raised, the model gets words for it
                exited = await exit_reason(self._spawned)
                if exited is not None:
                    # "Server 'crashy' exited with code 3: fatal: missing API key." (clients:
                    # "Server 'crashy' exited with code 3.")
                    self._failed(exited.removeprefix("it "),
                                 exit_class(exited).removeprefix("it "), started=False)
                status = f" ({self.http_status})" if self.http_status else ""
                self._failed(describe(exc) + status, f"it answered {self.http_status}"
                             if self.http_status else failure_class(exc))
            finally:
                self.starting = False
            self.starts += 1
            self.failed_at = None
            self._live = started
            if self.log_level is not None:  # what its clients asked for before it was up
                with contextlib.suppress(UpstreamError):
                    await bounded(self.name, self.config.timeout, started,
                                  "setting its log level", _sends_level(self.log_level),
                                  drop=self._drop, redact=self.redact)
            return started

    async def _start(self) -> Live:
        """A new connection, started in `mode`; a server that refuses the handshake naming only
        2026-07-28 versions is started again in that revision (and stays in it)."""
        for _ in range(2):
            self._spawned = Spawned()
            self.http_status = None
            try:
                with anyio.fail_after(self.config.timeout):
                    started: Live = await self._group.start(self._own)
                return started
            except Exception as exc:
                if self.mode != "legacy" or self.config.protocol == "handshake" or \
                        not era.modern_only(exc):
                    raise
                log.info("upstream %r refused the handshake naming only 2026-07-28 versions: "
                         "spoken to in that revision", self.name)
                self.mode = "auto"
        raise AssertionError("unreachable")  # pragma: no cover: the second start raises

    def _failed(self, why: str, said: str, *, started: bool = True) -> NoReturn:
        """Raise why the server could not start (`said`: its class, what clients are told)."""
        self.failed_at = time.monotonic()
        self.last_error = why
        if not started:  # it ran and exited: its own words say why (the operator's)
            detail = f"Server {self.name!r} {why}{'' if why.endswith('.') else '.'}"
            public = f"Server {self.name!r} {said}."
        else:
            detail = f"Server {self.name!r} could not be started: {why}."
            public = f"Server {self.name!r} could not be started: {said}."
        # The operator's line, whatever the client is shown (errlog: the gateway's stderr).
        with contextlib.suppress(Exception):
            print(f"byref gateway: {detail}",
                  file=self._errlog if self._errlog is not None else sys.stderr, flush=True)
        raise UpstreamError(detail, public)

    async def _drop(self, live: Live) -> None:
        if self._live is live:
            self._live = None
        live.stop.set()

    async def _own(self, *, task_status: anyio.abc.TaskStatus[Live]) -> None:
        """Holds one connection open until it is stopped or breaks (runs in the gateway's group)."""
        # Whatever the server sends is routed by what is in flight (`relay`), never by the mark
        # of the request that happened to start it (this task's context is a copy of its).
        CALLER.set(None)
        live = Live(spawned=self._spawned)

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):
                live.fail(f"it sent a message that is not valid JSON-RPC "
                          f"({first_line(str(message))})",
                          "it sent a message that is not valid JSON-RPC")
            elif isinstance(message, types.ServerNotification) and isinstance(
                    message, types.ToolListChangedNotification) and self._on_change is not None:
                await self._on_change(self.name)
            elif self.on_notice is not None and isinstance(message, (
                    types.ResourceUpdatedNotification, types.ResourceListChangedNotification,
                    types.PromptListChangedNotification)):
                await self.on_notice(self.name, message)

        started = False
        try:
            async with Client(self._target(), message_handler=on_message, cache=None,
                              mode=self.mode, **self._offered()) as client, \
                    anyio.create_task_group() as group:
                live.client = client
                started = True
                task_status.started(live)
                self.watched.attach(client, group, self._missed_updates)
                wanted = era.listens_for(client, tools=self._on_change is not None,
                                         others=self.on_notice is not None)
                if wanted is not None:
                    group.start_soon(era.listen, client, wanted, live.stop,
                                     lambda: self._missed(wanted))
                await live.stop.wait()
                group.cancel_scope.cancel()
        except Exception as exc:
            if not started:
                raise
            live.fail(describe(exc), failure_class(exc))
            log.info("upstream %r closed: %s", self.name, describe(exc))
        finally:
            live.end()
            live.done.set()

    def _offered(self) -> dict[str, Any]:
        """What the gateway offers the server: sampling, elicitation and roots (answered by the
        calling client, `relay`), and its log messages (forwarded naming the server)."""
        relay = self.relay

        async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
            kind = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
            return await relay.forward(types.CreateMessageRequest(params=params), kind)

        async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
            return await relay.forward(types.ElicitRequest(params=params), types.ElicitResult)

        async def roots(_: Any) -> Any:
            return await relay.forward(types.ListRootsRequest(), types.ListRootsResult)

        return {"sampling_callback": sampling, "elicitation_callback": elicitation,
                "list_roots_callback": roots, "logging_callback": relay.log,
                "sampling_capabilities": types.SamplingCapability(
                    tools=types.SamplingToolsCapability())}

    async def _missed(self, wanted: era.Wanted) -> None:
        """A 2026-07-28 listen stream was opened again: the lists it follows are refetched
        (what changed meanwhile was not told)."""
        if wanted.tools and self._on_change is not None:
            await self._on_change(self.name)
        if self.on_notice is not None:
            if wanted.resources:
                await self.on_notice(self.name, types.ResourceListChangedNotification())
            if wanted.prompts:
                await self.on_notice(self.name, types.PromptListChangedNotification())

    async def _saw_response(self, response: Any) -> None:
        # A request's refusal (the listening GET's 405 says nothing about requests).
        if response.status_code >= 400 and response.request.method == "POST":
            self.http_status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()

    def _target(self) -> Any:
        c = self.config
        if c.server is not None:  # in this process: the SDK's Client connects it in memory
            return c.server
        if c.transport == "sse":
            assert c.url is not None
            return sse_client(c.url, headers=c.headers or None, timeout=c.timeout)
        if c.url is not None:
            http = create_mcp_http_client(headers=c.headers or None)
            http.event_hooks["response"].append(self._saw_response)
            return streamable_http_client(c.url, http_client=http,
                                          max_sse_event_size=UPSTREAM_EVENT_BYTES)
        assert c.command is not None
        # The server's stderr goes where the gateway operator will see it (never to stdout,
        # which carries the gateway's own protocol over stdio).
        errlog = self._errlog if self._errlog is not None else sys.stderr
        params = StdioServerParameters(command=c.command, args=list(c.args), env=c.env or None,
                                       cwd=c.cwd)
        if sys.platform == "win32" or self._spawned is None:  # pragma: no cover
            return stdio_client(params, errlog=errlog)
        return stdio_process(params, self._spawned, errlog=errlog)


def _sends_level(level: types.LoggingLevel) -> Callable[[Client], Awaitable[None]]:
    """The operation telling a server its log level (nothing for one that does not log)."""

    async def send(client: Client) -> None:
        if client.server_capabilities.logging is None or modern(client):
            return  # 2026-07-28 has no logging/setLevel: each request carries it (`relay`)
        with warnings.catch_warnings():  # deprecated for 2026-07-28 servers
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level(level)

    return send
