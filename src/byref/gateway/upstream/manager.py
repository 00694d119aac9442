"""Upstream MCP servers: started lazily, restarted after a crash, every call bounded in time.

Owns the connections to the servers in the config, through the official `mcp` client (a plain
`tools/call` on a stdio server through `raw_calls`, on the same pipes, with the same outcomes). The
law: an upstream failure — it cannot start, it crashes mid-call, it hangs past its timeout, it
writes a line that is not JSON-RPC — becomes an `UpstreamError` whose text names the server and
says what happened, never an exception that escapes into the gateway; a broken connection is
dropped and the next call starts the server again, so one bad server never stops the others being
served (one bounded operation and the words for each failure: `upstream_bounds`). Each
connection is owned by one task of the gateway's task group (the SDK's client must be entered and
left in the same task); calls from other tasks use it while it lives. An `Upstream` is one
process (or remote session) of a server; which clients share it is `pool`'s.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, NoReturn, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.gateway.config.secrets import redactor
from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream import raw_calls
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
from byref.gateway.upstream.relay import CALLER, Relay, current
from byref.gateway.upstream.spawn import Spawned, stdio_process
from byref.gateway.wire.bypass import lanes_on
from byref.gateway.wire.sdk_client import create_mcp_http_client

log = logging.getLogger("byref.gateway")
T = TypeVar("T")

START_RETRY_AFTER = 30.0
"""Seconds before a server that failed to start is tried again for a listing."""
LIST_READY = 1.0
"""Seconds a client's list waits for a server still starting before it is answered without it
(the server's part announced by a list change once it is up): Claude Code gives up on a list
after ~5 s, and a server may take far longer to start."""


UPSTREAM_MODE: Literal["legacy"] = "legacy"
"""Upstreams are spoken to in the handshake generation, which every server serves: a server's
tool that asks its client for sampling, elicitation or roots mid-call, logs, or takes resource
subscriptions does so only there (a 2026-07-28 connection has no server→client requests). What
the gateway's own client speaks is independent (`relay` answers either way)."""


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
        """The last HTTP error status a remote server answered ("HTTP 401 Unauthorized"): the
        SDK reports it as "Server returned an error response" alone."""
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

    # -- public --------------------------------------------------------------------------------
    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists (following pagination)."""

        async def fetch(client: Client) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            for _ in range(100):  # a paginator that never ends cannot hang the gateway
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
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
        meta = caller.forwarded_meta() if caller is not None else None

        async def run(client: Client) -> types.CallToolResult:
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

    @property
    def alive(self) -> bool:
        """Whether a process (or session) runs or is being started for this upstream."""
        live = self._live
        return self.starting or (live is not None and not live.broken.is_set())

    @property
    def busy(self) -> bool:
        """Whether an operation is in flight on it (a busy upstream is never stopped as idle)."""
        live = self._live
        return self.relay.in_flight > 0 or (live is not None and bool(live.calls))

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
                                 drop=self._drop, redact=self.redact)
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
            spawned = self._spawned = Spawned()
            self.http_status = None
            self.starting = True
            try:
                with anyio.fail_after(self.config.timeout):
                    started: Live = await self._group.start(self._own)
            except TimeoutError:
                said = spawned.tail()
                hung = f"it did not complete the MCP handshake within {self.config.timeout:g} s"
                self._failed(hung + (f"; its stderr: {said}" if said else ""), hung)
            except Exception as exc:  # whatever starting raised, the model gets words for it
                exited = await exit_reason(spawned)
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
            return started

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
                              mode=UPSTREAM_MODE, **self._offered()) as client:
                live.client = client
                started = True
                task_status.started(live)
                async with anyio.create_task_group() as group:
                    if self._listens(client):
                        group.start_soon(self._listen, client, live)
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

    def _listens(self, client: Client) -> bool:
        tools = client.server_capabilities.tools
        return (self._on_change is not None and client.protocol_version in
                MODERN_PROTOCOL_VERSIONS and tools is not None and bool(tools.list_changed))

    async def _listen(self, client: Client, live: Live) -> None:
        assert self._on_change is not None
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    await self._on_change(self.name)

    async def _saw_response(self, response: Any) -> None:
        if response.status_code >= 400:
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
            return streamable_http_client(c.url, http_client=http)
        assert c.command is not None
        # The server's stderr goes where the gateway operator will see it (never to stdout,
        # which carries the gateway's own protocol over stdio).
        errlog = self._errlog if self._errlog is not None else sys.stderr
        params = StdioServerParameters(command=c.command, args=list(c.args), env=c.env or None,
                                       cwd=c.cwd)
        if sys.platform == "win32" or self._spawned is None:  # pragma: no cover
            return stdio_client(params, errlog=errlog)
        return stdio_process(params, self._spawned, errlog=errlog)
