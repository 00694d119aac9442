"""The pool of upstream instances: how many may run, and which are stopped as idle.

Owns `Pool`: every pooled instance of a gateway (which instance serves a request is `pooled`'s),
started on its owner's first operation, stopped after `idle` seconds without one, at most
`max_live` per gateway and `max_per_tenant` per tenant alive; what metrics and health read. The
law: a start past a cap first stops the least recently used idle instance it may, else is refused
at once in one line naming the limit (never queued); an instance with an operation in flight or a
resource watched is never stopped as idle. Admission is one at a time and reserves the slot until
the operation that asked for it ends (`settled`), so live plus starting instances never exceed
either cap, however many first calls arrive at once. A prestart (`reserve`: a start no
operation asked for) is made only where every cap has room as things stand: it never stops
another instance, is never refused (nor counted as refused), and holds its slot as a start does.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

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
    reserved: int = 0
    """Operations admitted to start it that have not ended yet (their slot is held)."""

    @property
    def counted(self) -> bool:
        """Whether it takes a slot of the caps: running, starting, or admitted to start."""
        return self.reserved > 0 or self.up.alive


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
        self.prestarts = 0
        """Starts a prestart reserved a slot for (`reserve`)."""
        self.prestarts_skipped = 0
        """Prestarts not made: a cap had no room without stopping another instance."""
        self._admitting = anyio.Lock()

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

    def settled(self, server: str, key: Key) -> None:
        """The start an admission reserved a slot for has ended (up or failed): the slot is
        held by the instance itself if it runs, else given back."""
        found = self._entries.get((server, key))
        if found is not None:
            found.used = self.clock()
            found.reserved = max(0, found.reserved - 1)

    @property
    def live(self) -> int:
        """Pooled instances running, starting or admitted to start now."""
        return sum(1 for e in self._entries.values() if e.counted)

    @property
    def idle_now(self) -> int:
        """Pooled instances running with nothing in flight."""
        return sum(1 for e in self._entries.values() if e.up.alive and not e.up.busy)

    def pids(self) -> dict[tuple[str, Key], int]:
        """The process id of each running pooled stdio instance."""
        return {k: e.up.pid for k, e in self._entries.items() if e.up.pid is not None}

    async def admit(self, server: str, key: Key, tenant: str | None) -> None:
        """Make room for starting instance (`server`, `key`): stop the least recently used idle
        instances full caps allow, else raise UpstreamError naming the limit. Admitted, its slot
        is reserved until the operation's `settled`."""
        async with self._admitting:  # one at a time: no two starts take the last slot
            for limit, cap, within in self._caps(tenant):
                others = self._others(server, key, within)
                idle = sorted((e for e in others if not e.up.busy and not e.reserved),
                              key=lambda e: e.used)
                if len(others) - len(idle) >= cap:
                    self._refuse(server, limit, cap, within, len(others))
            for _limit, cap, within in self._caps(tenant):  # the tenant's first: it frees both
                others = self._others(server, key, within)
                idle = sorted((e for e in others if not e.up.busy and not e.reserved),
                              key=lambda e: e.used)
                for stopping in idle[:max(0, len(others) - cap + 1)]:
                    await self._stop(stopping)
            entry = self._entries.get((server, key))
            if entry is not None:
                entry.reserved += 1

    async def reserve(self, server: str, key: Key, tenant: str | None) -> bool:
        """Reserve a slot for starting pooled instance (`server`, `key`) ahead of its owner's
        first operation, if every cap has room now: nothing is stopped for it and nothing
        refused. False when a cap is full, or the instance runs, starts or holds a slot."""
        async with self._admitting:
            entry = self._entries.get((server, key))
            if entry is None or entry.counted:
                return False
            if any(len(self._others(server, key, within)) >= cap
                   for _limit, cap, within in self._caps(tenant)):
                self.prestarts_skipped += 1
                return False
            entry.reserved += 1
            self.prestarts += 1
            return True

    def _caps(self, tenant: str | None) -> list[tuple[str, int, str | None]]:
        """Each cap that applies to a start for `tenant`: its name, size and tenant."""
        caps: list[tuple[str, int, str | None]] = [("maxProcesses", self.max_live, None)]
        if tenant is not None:
            caps.insert(0, ("maxPerTenant", self.max_per_tenant, tenant))
        return caps

    def _others(self, server: str, key: Key, within: str | None) -> list[_Entry]:
        """The other instances a cap counts (of tenant `within`, or all)."""
        return [e for k, e in self._entries.items() if k != (server, key) and e.counted
                and (within is None or e.tenant == within)]

    def _refuse(self, server: str, limit: str, cap: int, within: str | None,
                n: int) -> NoReturn:
        self.refused[limit] += 1
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
            if e.up.busy or e.reserved or now - e.used < self.idle:
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

