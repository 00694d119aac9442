"""What the gateway asks of one upstream instance: its tools, a call, a request, a log level.

Owns `Upstream`: a `Connection` (`connection`) and the operations run on it — a tool listing
followed through its pages, keeping its cache hint (`hints`); a call carrying the client's
progress token and forwarded `_meta` (a plain `tools/call` on a stdio server goes through
`raw_calls`, on the same pipes, with the same outcomes); a wait for a server still starting
(`ready`); its watched resources counted (`watch`); its clients' log level. The law: every
operation is bounded and fails as a call does (an `UpstreamError`), on the caller's flight
(`relay`); what was answered without a server still starting is told once it is up (once per
kind); setting a level or dropping a watcher never starts a server.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client

from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream.instance import raw_calls
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.connection import Connection, sends_level
from byref.gateway.upstream.modern.hints import Kept, hint_of
from byref.gateway.upstream.modern.watch import modern
from byref.gateway.upstream.relay import current
from byref.gateway.wire.bypass import lanes_on
from byref.refs import quote

T = TypeVar("T")

START_RETRY_AFTER = 30.0
"""Seconds before a server that failed to start is tried again for a listing."""
LIST_READY = 1.0
"""Seconds a client's list waits for a server still starting before it is answered without it
(the server's part announced by a list change once it is up): Claude Code gives up on a list
after ~5 s, and a server may take far longer to start."""


class Upstream(Connection):
    """One process (or remote session) of a configured server: what the gateway asks of it."""

    def __init__(self, config: ServerConfig, group: anyio.abc.TaskGroup, *,
                 on_change: Callable[[str], Awaitable[None]] | None = None,
                 errlog: TextIO | None = None) -> None:
        super().__init__(config, group, on_change=on_change, errlog=errlog)
        self._raw_lane = lanes_on()  # off: every call through the SDK's ClientSession
        self._warming: anyio.Event | None = None
        self._late: dict[str, Callable[[Client], Awaitable[None]]] = {}
        """What was answered without this server while it started, by what: told once it is up."""
        self._settling: list[Callable[[], None]] = []
        """Told once the background start ends, up or failed (`ready`'s `settled`)."""
        self.tools_hint: Kept | None = None
        """The cache hint of its last tool list (`hints`; None: it gave none)."""

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
                    late: Callable[[Client], Awaitable[None]], *,
                    settled: Callable[[], None] | None = None) -> Client | None:
        """The live client if the server is up within `within` s, else None: its start (begun
        in the background if none is under way) goes on, and `late(client)` runs once it is up
        (one per `doing`, however many requests went without it). `settled()` is called once
        the start is up or failed (at once when none is under way)."""
        client = self.connected
        if client is not None:
            if settled is not None:
                settled()
            return client
        warming = self._warming
        if warming is None:
            warming = self._warming = anyio.Event()
            self._group.start_soon(self._warm, warming)
        if settled is not None:
            self._settling.append(settled)
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
            settling, self._settling = self._settling, []
            for settled in settling:
                settled()
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
            await self._bounded("setting its log level", sends_level(level))

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
