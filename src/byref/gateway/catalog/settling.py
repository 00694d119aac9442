"""When a changed tool list is announced: once per settled change, not once per server.

Owns `Settling`: told of each change (a server listed after a client was answered without it, a
server saying its tools changed), it runs the gateway's announcement once the changes have
settled — `ANNOUNCE_QUIET` s without another and nothing the clients are waiting on still in
flight — and at most `ANNOUNCE_WITHIN` s after the first. Why: a start-up brings its servers in a
burst, and each notice makes every client re-list (Claude Code re-fetched 7-10 times); servers
arriving together are one change to the client.

The law: every change is announced (a change during an announcement starts the next one), never
later than `ANNOUNCE_WITHIN` s after it, and one announcement covers every change before it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

ANNOUNCE_QUIET = 0.25
"""Seconds without a further change before a tool-list change is announced."""
ANNOUNCE_WITHIN = 3.0
"""Seconds after a change by which it is announced, however many others are still arriving."""


class Settling:
    """Announces through `announce` once changes settle; `busy()` says something the clients
    wait on (a server they were answered without) is still in flight."""

    def __init__(self, announce: Callable[[], Awaitable[None]], busy: Callable[[], bool]) -> None:
        self._announce = announce
        self._busy = busy
        self._running = False
        self._changed_at = 0.0
        self._nudge: anyio.Event | None = None

    @property
    def settling(self) -> bool:
        """Whether an announcement is waiting for the changes to settle."""
        return self._running

    def changed(self, group: anyio.abc.TaskGroup) -> None:
        """Something changed: announce it (in `group`) once it settles."""
        self._changed_at = anyio.current_time()
        if self._nudge is not None:
            self._nudge.set()
        if not self._running:
            self._running = True
            group.start_soon(self._settle)

    async def _settle(self) -> None:
        deadline = anyio.current_time() + ANNOUNCE_WITHIN
        try:
            while (now := anyio.current_time()) < deadline:
                quiet = self._changed_at + ANNOUNCE_QUIET
                if now >= quiet and not self._busy():
                    break
                self._nudge = anyio.Event()  # a change or an arrival wakes it
                with anyio.move_on_after(min(deadline, quiet if now < quiet else deadline) - now):
                    await self._nudge.wait()
        finally:
            self._nudge = None
            self._running = False
        await self._announce()
