"""One upstream instance's connection: started lazily, restarted after a crash, bounded in time.

Owns `Connection`: one process (or remote session) of a configured server, connected through the
official `mcp` client in the protocol revision `era` picks for it, on the transport its entry
names (`transport`), and what the server sends routed (tool list changes to `on_change`, resource
and prompt notifications to `on_notice`, its requests and logs through `relay`). The law: an
upstream failure — it cannot start, it crashes mid-call, it hangs past its timeout, it writes a
line that is not JSON-RPC — becomes an `UpstreamError` whose text names the server and says what
happened, never an exception that escapes into the gateway; a broken connection is dropped and
the next operation starts the server again, so one bad server never stops the others being served
(one bounded operation and the words for each failure: `bounds`). Each connection is owned by one
task of the gateway's task group (the SDK's client must be entered and left in the same task);
operations from other tasks use it while it lives. What is asked of it is `manager`'s; which
clients share it, `pooled`'s.
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
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from byref.gateway.config.secrets import redactor
from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream.instance import raw_calls
from byref.gateway.upstream.instance.bounds import (
    Live,
    UpstreamError,
    bounded,
    describe,
    exit_class,
    exit_reason,
    failure_class,
    first_line,
)
from byref.gateway.upstream.instance.spawn import Spawned
from byref.gateway.upstream.instance.transport import offered, target
from byref.gateway.upstream.modern import era
from byref.gateway.upstream.modern.tasks import UpstreamTasks
from byref.gateway.upstream.modern.watch import Watched, modern
from byref.gateway.upstream.relay import CALLER, Relay

log = logging.getLogger("byref.gateway")
T = TypeVar("T")


class Connection:
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
        self.log_level: types.LoggingLevel | None = None
        """The log level its clients last asked for (`logging/setLevel`): sent at each start."""
        self.mode: era.Mode = era.first_mode(config)
        """How its connections start (`era`): `auto` once it refused the handshake."""
        self.watched = Watched(config.name)
        """Its resource URIs watched for updates, and how (`watch`)."""
        self.tasks = UpstreamTasks()
        """Its upstream's tasks, driven to completion (`modern.tasks`)."""

    # -- what the gateway reads ----------------------------------------------------------------
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
                                  "setting its log level", sends_level(self.log_level),
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
        offers = offered(self.relay)
        extensions = [self.tasks, *offers.pop("extensions")]  # tasks, and dev.byref/refs
        try:
            async with Client(target(self.config, self._spawned, self._errlog,
                                     self._saw_response),
                              message_handler=on_message, cache=None,
                              mode=self.mode, extensions=extensions,
                              **offers) as client, \
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

    async def _missed_updates(self, uris: frozenset[str]) -> None:
        """A resource listen stream was opened again: each URI it watches may have changed."""
        if self.on_notice is not None:
            for uri in sorted(uris):
                await self.on_notice(self.name, types.ResourceUpdatedNotification(
                    params=types.ResourceUpdatedNotificationParams(uri=uri)))

    async def _saw_response(self, response: Any) -> None:
        # A request's refusal (the listening GET's 405 says nothing about requests).
        if response.status_code >= 400 and response.request.method == "POST":
            self.http_status = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()


def sends_level(level: types.LoggingLevel) -> Callable[[Client], Awaitable[None]]:
    """The operation telling a server its log level (nothing for one that does not log)."""

    async def send(client: Client) -> None:
        if client.server_capabilities.logging is None or modern(client):
            return  # 2026-07-28 has no logging/setLevel: each request carries it (`relay`)
        with warnings.catch_warnings():  # deprecated for 2026-07-28 servers
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level(level)

    return send
