"""Worker threads by owner: one principal's blocking work never delays another's beyond a bound.

Owns `Threads` (the gateway's, one per gateway) and `ScopeThreads` (`dispatch.threads.Threads`
for one scope's dispatcher). The law: a `run_code` program runs on threads of its own
(`byref.codeRuns.maxRuns` at most, `maxPerPrincipal` per principal; a run past either cap is
refused at once in one line naming it, never queued), never on anyio's process-wide limiter; any
other blocking call of a principal first takes one of its `PRINCIPAL_THREADS` places, so one
principal holds at most that many of the shared limiter's threads; an `activate_tool` naming far
more tools than the catalog holds is refused before it takes any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NoReturn

import anyio

from byref.discovery.declaring.workingset import ACTIVATE
from byref.dispatch.calls import Call, Refusal
from byref.gateway.config.file import GatewayConfig
from byref.tools.code_mode.run_code import RUN_CODE
from byref.tools.tool import Tool

PRINCIPAL_THREADS = 8
"""Blocking calls one principal runs at once on anyio's shared limiter (40 threads): the rest of
its calls wait for its own, never another principal's."""
ACTIVATE_SLACK = 64
"""Names an activate_tool may give beyond the catalog's size (repeats) before it is refused."""
_KEPT_IDLE = 1024
"""Principals' lanes kept while nothing of theirs runs."""

Principal = tuple[str, str]


class Threads:
    """A gateway's lanes: the runs' own limiter, and one limiter per principal."""

    def __init__(self, config: GatewayConfig) -> None:
        self.max_runs = config.runs_max
        self.max_per_principal = config.runs_max_per_principal
        self.runs = anyio.CapacityLimiter(config.runs_max)
        """The threads run_code programs run on (never anyio's default limiter)."""
        self.running: Counter[Principal] = Counter()
        """Programs running now, by principal."""
        self.refused: Counter[str] = Counter()
        """Runs refused, by the setting that refused them."""
        self._lanes: dict[Principal, anyio.CapacityLimiter] = {}

    def of(self, principal: Principal, catalog_size: int) -> ScopeThreads:
        """The lanes of one scope's dispatcher (its principal's; `catalog_size` tools)."""
        return ScopeThreads(self, principal, catalog_size)

    def lane(self, principal: Principal) -> anyio.CapacityLimiter:
        """`principal`'s own limiter (made on first use; idle ones dropped past `_KEPT_IDLE`)."""
        found = self._lanes.get(principal)
        if found is None:
            if len(self._lanes) >= _KEPT_IDLE:
                for key in [k for k, v in self._lanes.items() if v.borrowed_tokens == 0]:
                    del self._lanes[key]
            found = self._lanes[principal] = anyio.CapacityLimiter(PRINCIPAL_THREADS)
        return found

    def admit_run(self, principal: Principal) -> None:
        """Count one program more for `principal`, or raise Refusal naming the full cap."""
        total = sum(self.running.values())
        mine = self.running[principal]
        if mine >= self.max_per_principal:
            self._refuse_run("maxPerPrincipal", self.max_per_principal,
                         f"{mine} of your programs already run")
        if total >= self.max_runs:
            self._refuse_run("maxRuns", self.max_runs, f"the gateway already runs {total} programs")
        self.running[principal] += 1

    def _refuse_run(self, setting: str, cap: int, why: str) -> NoReturn:
        self.refused[setting] += 1
        raise Refusal(f"Tool {RUN_CODE!r} did not run: {why} (byref.codeRuns.{setting} = "
                      f"{cap}); try again when one has finished.", "limit-runs")

    def ended_run(self, principal: Principal) -> None:
        """One program of `principal`'s ended."""
        self.running[principal] -= 1
        if self.running[principal] <= 0:
            del self.running[principal]


class ScopeThreads:
    """`dispatch.threads.Threads` for one scope: its principal's lane, runs on their own."""

    def __init__(self, threads: Threads, principal: Principal, catalog_size: int) -> None:
        self.threads = threads
        self.principal = principal
        self.catalog_size = catalog_size

    @asynccontextmanager
    async def enter(self, call: Call, tool: Tool | None) -> AsyncIterator[Any]:
        """Held while `call`'s blocking work runs; yields the limiter its thread takes."""
        name = tool.name if tool is not None else None
        if name == RUN_CODE:
            self.threads.admit_run(self.principal)
            try:
                yield self.threads.runs
            finally:
                self.threads.ended_run(self.principal)
            return
        if name == ACTIVATE:
            self._bounded_names(call)
        async with self.threads.lane(self.principal):
            yield None  # anyio's default limiter, one of this principal's places held

    def _bounded_names(self, call: Call) -> None:
        names = call.input.get("names") if isinstance(call.input, dict) else None
        most = self.catalog_size + ACTIVATE_SLACK
        if isinstance(names, list) and len(names) > most:
            raise Refusal(
                f"Tool {ACTIVATE!r} did not run: {len(names)} names are more than the catalog "
                f"holds ({self.catalog_size} tools); name the tools you want from a "
                "search_tools result.", "invalid-input")
