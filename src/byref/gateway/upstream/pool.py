"""The pool of upstream instances: how many may run, and which are stopped as idle.

Owns `Pool`: every pooled instance of a gateway (which instance serves a request is `pooled`'s),
started on its owner's first operation, stopped after `idle` seconds without one, at most
`max_live` per gateway and `max_per_tenant` per tenant alive; what metrics and health read. The
law: a start past a cap first stops the least recently used idle instance it may, else is refused
at once in one line naming the limit (never queued); an instance with an operation in flight or a
resource watched is never stopped as idle.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.abc

from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.manager import Upstream

Key = tuple[str, ...]
"""Which instance of a server (`pooled.key_of`)."""
SWEEP_EVERY = 30.0
"""Seconds between idle sweeps at most (a quarter of the idle time when that is shorter)."""


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

