"""Who shares an upstream process: one per server, tenant, principal or conversation, pooled.

Owns `Pooled` (one configured server as the rest of the gateway reaches it: each operation runs on
the instance — a process for stdio, an upstream session for a remote `url` — of the scope it runs
as, by the server's `share`), `Pool` (every pooled instance of a gateway: started on its owner's
first operation, stopped after `idle` seconds without one, at most `max_live` per gateway and
`max_per_tenant` per tenant alive) and `UpstreamManager` (the servers by name).

The law: an instance serves only its owner's requests, so what a server keeps about its client
(roots, log level, session, files it was allowed) never reaches another owner, and what it sends
goes back only to its owner's calls (`relay`). A start past a cap first stops the least recently
used idle instance it may, else is refused at once in one line naming the limit (never queued);
an instance that crashes is started again by its owner's next call, alone. A server shared by
all (`"share": "all"`, the default on a gateway one principal reaches) is one instance, outside
the caps, as without a pool. The one catalog is listed on the caller's instance (every instance
of a server is started alike, so their lists agree), or with no caller on a live one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.server.caching import CacheHint

from byref.gateway.config.file import GatewayConfig
from byref.gateway.config.secrets import redactor
from byref.gateway.config.servers import ServerConfig, Share
from byref.gateway.upstream.bounds import UpstreamError
from byref.gateway.upstream.manager import Upstream
from byref.gateway.upstream.relay import Caller, current
from byref.store import Scope

T = TypeVar("T")
Key = tuple[str, ...]
Notice = Callable[[str, Any, Key], Awaitable[None]]
"""Told (server, notification, the key of the instance that sent it)."""
SHARED: Key = ()
"""The one instance of a server shared by all."""
CATALOG: Key = ("", "byref-catalog")
"""The instance a pooled server is listed on when no client request asks and none is alive."""
SWEEP_EVERY = 30.0
"""Seconds between idle sweeps at most (a quarter of the idle time when that is shorter)."""


def key_of(share: Share, owner: Scope | None) -> Key:
    """Which instance of a server `share`d so serves a request run as `owner`."""
    if share == "all":
        return SHARED
    if owner is None:
        return CATALOG
    if share == "tenant":
        return (owner.tenant,)
    if share == "principal":
        return (owner.tenant, owner.principal)
    return (owner.tenant, owner.principal, owner.conversation)


@dataclass(eq=False)
class _Entry:
    up: Upstream
    tenant: str | None
    used: float
    forget: Callable[[], None]
    """Drops the instance from its server once it is stopped as idle."""


class Pool:
    """Every pooled instance of a gateway, its caps and idle time; what metrics and health
    read (`live`, `idle`, `refused`)."""

    def __init__(self, *, idle: float, max_live: int, max_per_tenant: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle = idle
        self.max_live = max_live
        self.max_per_tenant = max_per_tenant
        self.clock = clock
        """Seconds, monotonic; a test drives it to make instances idle without waiting."""
        self._entries: dict[tuple[str, Key], _Entry] = {}
        self.refused: Counter[str] = Counter()
        """Starts refused, by the limit that refused them."""
        self.stopped_idle = 0

    def entry(self, server: str, key: Key) -> _Entry | None:
        """The entry of instance (`server`, `key`), if pooled."""
        return self._entries.get((server, key))

    def add(self, server: str, key: Key, up: Upstream, tenant: str | None,
            forget: Callable[[], None]) -> None:
        """Pool a new instance (`forget` drops it from its server once stopped as idle)."""
        self._entries[(server, key)] = _Entry(up, tenant, self.clock(), forget)

    def touch(self, server: str, key: Key) -> None:
        """The instance was used now (its idle time starts again)."""
        found = self._entries.get((server, key))
        if found is not None:
            found.used = self.clock()

    @property
    def live(self) -> int:
        """Pooled instances running (or starting) now."""
        return sum(1 for e in self._entries.values() if e.up.alive)

    @property
    def idle_now(self) -> int:
        """Pooled instances running with nothing in flight."""
        return sum(1 for e in self._entries.values() if e.up.alive and not e.up.busy)

    def pids(self) -> dict[tuple[str, Key], int]:
        """The process id of each running pooled stdio instance."""
        return {k: e.up.pid for k, e in self._entries.items() if e.up.pid is not None}

    async def admit(self, server: str, key: Key, tenant: str | None) -> None:
        """Make room for starting instance (`server`, `key`): stop the least recently used idle
        instance a full cap allows, else raise UpstreamError naming the limit."""
        # The tenant's cap first: an idle process of its own stopped frees a gateway slot too.
        for limit, cap, within in (
                ("maxPerTenant", self.max_per_tenant, tenant),
                ("maxProcesses", self.max_live, None)):
            if limit == "maxPerTenant" and tenant is None:
                continue
            others = [e for k, e in self._entries.items() if k != (server, key) and e.up.alive
                      and (within is None or e.tenant == within)]
            if len(others) < cap:
                continue
            idle = sorted((e for e in others if not e.up.busy), key=lambda e: e.used)
            if idle:
                await self._stop(idle[0])
                continue
            self.refused[limit] += 1
            n = len(others)
            whose = "" if within is None else f" for tenant {within!r}"
            line = (f"Server {server!r} was not started for this call: the pool already runs "
                    f"{n} upstream process{'' if n == 1 else 'es'}{whose} and none is idle "
                    f"(byref.pool.{limit} = {cap}); try again when a call has finished.")
            raise UpstreamError(line, line)  # names no configured value: clients see it all

    async def sweep(self) -> int:
        """Stop every instance idle for `idle` seconds or more (and forget stopped ones);
        returns how many were stopped."""
        now = self.clock()
        stopped = 0
        for k, e in list(self._entries.items()):
            if e.up.busy or now - e.used < self.idle:
                continue
            if e.up.alive:
                stopped += 1
                await self._stop(e)
            self._entries.pop(k, None)
            e.forget()
        self.stopped_idle += stopped
        return stopped

    async def _stop(self, entry: _Entry) -> None:
        await entry.up.close()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Sweep idle instances for as long as the gateway runs."""
        task_status.started()
        while True:
            await anyio.sleep(min(SWEEP_EVERY, self.idle / 4))
            await self.sweep()


class Pooled:
    """One configured server: its operations run on the caller's instance (by `share`)."""

    def __init__(self, config: ServerConfig, share: Share, pool: Pool,
                 group: anyio.abc.TaskGroup, *,
                 on_change: Callable[[str], Awaitable[None]] | None = None,
                 errlog: TextIO | None = None, one_principal: bool = False) -> None:
        self.config = config
        self.name = config.name
        self.share = share
        self.one_principal = one_principal
        """Whether one principal at most reaches the gateway (stdio, or one token)."""
        self.redact = redactor(config)
        """`text` without any value this server's entry configures (`config.secrets`)."""
        self._pool = pool
        def make() -> Upstream:
            return Upstream(config, group, on_change=on_change, errlog=errlog)

        self._make = make
        self._instances: dict[Key, Upstream] = {}
        self._retired_starts = 0
        self._on_notice: Notice | None = None
        self._listed_on: Upstream | None = None

    # -- what the gateway reads ----------------------------------------------------------------
    @property
    def on_notice(self) -> Notice | None:
        """Told (server, notification, instance key) of each instance's resource and prompt
        notifications."""
        return self._on_notice

    @on_notice.setter
    def on_notice(self, notice: Notice | None) -> None:
        self._on_notice = notice
        for key, up in self._instances.items():
            up.on_notice = self._told(key)

    def _told(self, key: Key) -> Callable[[str, Any], Awaitable[None]] | None:
        """What instance `key` tells of its notifications: `on_notice`, naming it."""
        notice = self._on_notice
        if notice is None:
            return None

        async def tell(server: str, message: Any) -> None:
            await notice(server, message, key)

        return tell

    @property
    def starts(self) -> int:
        """Starts of every instance of this server so far."""
        return self._retired_starts + sum(u.starts for u in self._instances.values())

    @property
    def failed_at(self) -> float | None:
        """When the instance last listed failed to start (the catalog retries after a while)."""
        return self._listed_on.failed_at if self._listed_on is not None else None

    @property
    def last_error(self) -> str | None:
        """Why the instance last listed failed to start, if it did."""
        return self._listed_on.last_error if self._listed_on is not None else None

    def tools_hint(self) -> CacheHint | None:
        """The cache hint of the tool list the catalog holds, as it stands now (`hints.Kept`;
        None: the server gave none)."""
        up = self._listed_on
        kept = up.tools_hint if up is not None else None
        return kept.now() if kept is not None else None

    @property
    def in_flight(self) -> int:
        """Client requests in flight on every instance."""
        return sum(u.relay.in_flight for u in self._instances.values())

    @property
    def instances(self) -> dict[Key, Upstream]:
        """The instances by key (one, `SHARED`, for a server shared by all)."""
        return dict(self._instances)

    def serving(self, caller: Caller | None) -> Upstream | None:
        """The instance that serves `caller`'s requests, if it exists."""
        return self._instances.get(key_of(self.share, caller.owner if caller else None))

    # -- operations ----------------------------------------------------------------------------
    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server lists, from the caller's instance (else a live one)."""
        key, up = await self._serving(any_live=True)
        self._listed_on = up
        try:
            return await up.list_tools()
        finally:
            self._used(key)

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run `tool` on the caller's instance (see `Upstream.call`)."""
        key, up = await self._serving()
        try:
            return await up.call(tool, arguments)
        finally:
            self._used(key)

    async def request(self, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        """Any other operation on the caller's instance, bounded and failing as a call does."""
        key, up = await self._serving()
        try:
            return await up.request(doing, op)
        finally:
            self._used(key)

    async def ready(self, within: float, doing: str,
                    late: Callable[[Client], Awaitable[None]]) -> Client | None:
        """The caller's instance's live client if it is up within `within` s, else None (its
        start goes on; `late(client)` runs once it is up: see `Upstream.ready`)."""
        key, up = await self._serving(any_live=True)
        try:
            return await up.ready(within, doing, late)
        finally:
            self._used(key)

    async def set_level(self, level: types.LoggingLevel) -> None:
        """The caller's instance logs at `level` from now on (`Upstream.set_level`: sent now if
        it runs, else when it starts; this never starts it)."""
        caller = current()
        if caller is not None:  # a 2026-07-28 instance hears it per request, from the session
            caller.set_session_level(level)
        key = key_of(self.share, caller.owner if caller is not None else None)
        up = self._instances.get(key)
        if up is None:
            up = self._add(key)
        await up.set_level(level)

    async def watch(self, uri: str) -> None:
        """The caller's instance watches `uri` for one watcher more (`Upstream.watch`)."""
        key, up = await self._serving()
        try:
            await up.watch(uri)
        finally:
            self._used(key)

    async def unwatch(self, uri: str, key: Key) -> None:
        """Instance `key` watches `uri` for one watcher fewer (`Upstream.unwatch`; an instance
        gone meanwhile watches nothing)."""
        up = self._instances.get(key)
        if up is not None:
            await up.unwatch(uri)

    async def close(self) -> None:
        """Stop every instance."""
        async with anyio.create_task_group() as group:
            for up in self._instances.values():
                group.start_soon(up.close)

    # -- instances -----------------------------------------------------------------------------
    async def _serving(self, *, any_live: bool = False) -> tuple[Key, Upstream]:
        """The instance that serves the current caller, and its key (`any_live`: with no caller,
        a live instance rather than the catalog's own, when one runs)."""
        caller = current()
        key = key_of(self.share, caller.owner if caller is not None else None)
        if any_live and caller is None and self.share != "all":
            key = next((k for k, u in self._instances.items() if u.alive), key)
        return key, await self._instance(key)

    async def _instance(self, key: Key) -> Upstream:
        up = self._instances.get(key)
        if up is None:
            up = self._add(key)
        if key != SHARED:
            if not up.alive:
                await self._pool.admit(self.name, key, self._tenant(key))
            self._pool.touch(self.name, key)
        return up

    def _add(self, key: Key) -> Upstream:
        """A new instance for `key`, pooled, not started."""
        up = self._instances[key] = self._make()
        up.on_notice = self._told(key)
        # One principal's (or conversation's) own: its one session may be asked out of call.
        up.relay.exclusive = self.one_principal or (
            self.share in ("principal", "conversation") and key != CATALOG)
        if key != SHARED:
            self._pool.add(self.name, key, up, self._tenant(key), lambda: self._forget(key, up))
        return up

    @staticmethod
    def _tenant(key: Key) -> str | None:
        return key[0] if key and key != CATALOG else None

    def _forget(self, key: Key, up: Upstream) -> None:
        if self._instances.get(key) is up:
            del self._instances[key]
            self._retired_starts += up.starts

    def _used(self, key: Key) -> None:
        if key != SHARED:
            self._pool.touch(self.name, key)


class UpstreamManager:
    """Every configured upstream, by name, and the pool of their instances."""

    def __init__(self, config: GatewayConfig, group: anyio.abc.TaskGroup, *,
                 on_change: Callable[[str], Awaitable[None]] | None = None,
                 errlog: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool = Pool(idle=config.pool_idle, max_live=config.pool_max,
                         max_per_tenant=config.pool_max_per_tenant, clock=clock)
        self.upstreams = {c.name: Pooled(c, config.share_of(c), self.pool, group,
                                         on_change=on_change, errlog=errlog,
                                         one_principal=config.principals <= 1)
                          for c in config.servers}

    def __getitem__(self, name: str) -> Pooled:
        return self.upstreams[name]

    @property
    def pooled(self) -> bool:
        """Whether any server runs an instance per tenant, principal or conversation."""
        return any(p.share != "all" for p in self.upstreams.values())

    async def list_all(self) -> tuple[dict[str, list[types.Tool]], dict[str, str]]:
        """Listings of every server that answers, and why each other one did not (in parallel)."""
        listings: dict[str, list[types.Tool]] = {}
        errors: dict[str, str] = {}

        async def one(up: Pooled) -> None:
            try:
                listings[up.name] = await up.list_tools()
            except UpstreamError as exc:
                errors[up.name] = exc.public

        async with anyio.create_task_group() as group:
            for up in self.upstreams.values():
                group.start_soon(one, up)
        return listings, errors

    async def close(self) -> None:
        """Close every upstream connection, in parallel."""
        async with anyio.create_task_group() as group:
            for up in self.upstreams.values():
                group.start_soon(up.close)
