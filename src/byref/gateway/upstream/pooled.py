"""Who shares an upstream process: one per server, tenant, principal or conversation.

Owns `Pooled` (one configured server as the rest of the gateway reaches it: each operation runs on
the instance — a process for stdio, an upstream session for a remote `url` — of the scope it runs
as, by the server's `share`: `key_of`) and `UpstreamManager` (the servers by name, and the `pool`
of their instances).

The law: an instance serves only its owner's requests, so what a server keeps about its client
(roots, log level, session, files it was allowed) never reaches another owner, and what it sends
goes back only to its owner's calls (`relay`). An instance that crashes is started again by its
owner's next call, alone. A server shared by all (`"share": "all"`, the default on a gateway one
principal reaches) is one instance, outside the pool's caps, as without a pool. The one catalog is
listed on the caller's instance (every instance of a server is started alike, so their lists
agree), or with no caller on a live one; an instance of an owner's own that says its tools
changed is re-listed for that owner alone (`on_own_change`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TextIO, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.server.caching import CacheHint

from byref.gateway.config.file import GatewayConfig
from byref.gateway.config.secrets import redactor
from byref.gateway.config.servers import ServerConfig, Share
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.manager import Upstream
from byref.gateway.upstream.pool import Key, Pool
from byref.gateway.upstream.relay import Caller, current
from byref.store import Scope

T = TypeVar("T")
Notice = Callable[[str, Any, Key], Awaitable[None]]
"""Told (server, notification, the key of the instance that sent it)."""
SHARED: Key = ()
"""The one instance of a server shared by all."""
CATALOG: Key = ("", "byref-catalog")
"""The instance a pooled server is listed on when no client request asks and none is alive."""


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
        self.on_own_change: Callable[[str, Key], Awaitable[None]] | None = None
        """Told (server, instance key) when an instance of an owner's own (not `SHARED`, not
        `CATALOG`) says its tools changed; without it, `on_change` is told (server)."""
        self.on_own_gone: Callable[[str, Key], None] | None = None
        """Told (server, instance key) when the pool retired that instance."""

        def make(key: Key) -> Upstream:
            async def changed(server: str) -> None:
                if self.on_own_change is not None and key not in (SHARED, CATALOG):
                    await self.on_own_change(server, key)
                elif on_change is not None:
                    await on_change(server)

            return Upstream(config, group, on_change=None if on_change is None else changed,
                            errlog=errlog)

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

    def key_of(self, owner: Scope | None) -> Key:
        """The key of the instance that serves requests run as `owner`."""
        return key_of(self.share, owner)

    async def list_tools_on(self, key: Key) -> list[types.Tool] | None:
        """The tools instance `key` lists now (None: it is not running)."""
        up = self._instances.get(key)
        if up is None or not up.alive:
            return None
        return await up.list_tools()

    def serving(self, caller: Caller | None) -> Upstream | None:
        """The instance that serves `caller`'s requests, if it exists."""
        return self._instances.get(key_of(self.share, caller.owner if caller else None))

    # -- operations ----------------------------------------------------------------------------
    async def list_tools(self, avoid: Collection[Key] = ()) -> list[types.Tool]:
        """Every tool the server lists, from the caller's instance (else a live one), never
        from one in `avoid` (instances whose owners see a list of their own)."""
        key, up, held = await self._serving(any_live=True, avoid=avoid)
        self._listed_on = up
        try:
            return await up.list_tools()
        finally:
            self._used(key, held)

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run `tool` on the caller's instance (see `Upstream.call`)."""
        key, up, held = await self._serving()
        try:
            return await up.call(tool, arguments)
        finally:
            self._used(key, held)

    async def request(self, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        """Any other operation on the caller's instance, bounded and failing as a call does."""
        key, up, held = await self._serving()
        try:
            return await up.request(doing, op)
        finally:
            self._used(key, held)

    async def ready(self, within: float, doing: str,
                    late: Callable[[Client], Awaitable[None]]) -> Client | None:
        """The caller's instance's live client if it is up within `within` s, else None (its
        start goes on; `late(client)` runs once it is up: see `Upstream.ready`)."""
        key, up, held = await self._serving(any_live=True)
        # A start that goes on past `within` keeps its reserved slot until it is up or failed.
        settle = (lambda: self._used(key, True)) if held else None
        try:
            return await up.ready(within, doing, late, settled=settle)
        finally:
            self._used(key, False)

    async def prestart(self, owner: Scope) -> bool:
        """Begin starting the instance that serves `owner`, if it is not running or starting,
        without waiting for it: a pooled one only where the pool's caps have room now
        (`Pool.reserve`; nothing stopped, nothing refused). Returns whether a start began."""
        key = key_of(self.share, owner)
        up = self._instances.get(key)
        if up is None:
            up = self._add(key)
        if key == SHARED and up.alive:
            return False
        if key != SHARED and not await self._pool.reserve(self.name, key, self._tenant(key)):
            return False
        await up.ready(0.0, "prestart", _nothing,
                       settled=None if key == SHARED else lambda: self._used(key, True))
        return True

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
        key, up, held = await self._serving()
        try:
            await up.watch(uri)
        finally:
            self._used(key, held)

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
    async def _serving(self, *, any_live: bool = False, avoid: Collection[Key] = ()
                       ) -> tuple[Key, Upstream, bool]:
        """The instance that serves the current caller, its key (`any_live`: with no caller,
        a live instance rather than the catalog's own, when one runs; none in `avoid`), and
        whether a pool slot was reserved for its start (given back by `_used`)."""
        caller = current()
        key = key_of(self.share, caller.owner if caller is not None else None)
        if key in avoid:
            key = CATALOG
        if any_live and key == CATALOG and self.share != "all":
            key = next((k for k, u in self._instances.items() if u.alive and k not in avoid),
                       key)
        up, held = await self._instance(key)
        return key, up, held

    async def _instance(self, key: Key) -> tuple[Upstream, bool]:
        up = self._instances.get(key)
        if up is None:
            up = self._add(key)
        held = False
        if key != SHARED:
            if not up.alive:
                await self._pool.admit(self.name, key, self._tenant(key))
                held = True
            self._pool.touch(self.name, key)
        return up, held

    def _add(self, key: Key) -> Upstream:
        """A new instance for `key`, pooled, not started."""
        up = self._instances[key] = self._make(key)
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
            if self.on_own_gone is not None:
                self.on_own_gone(self.name, key)

    def _used(self, key: Key, held: bool) -> None:
        if key == SHARED:
            return
        if held:
            self._pool.settled(self.name, key)
        else:
            self._pool.touch(self.name, key)


async def _nothing(_: Client) -> None:
    """What a prestart tells once its instance is up: nothing (no request went without it)."""


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
