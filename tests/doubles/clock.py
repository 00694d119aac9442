"""`ManualClock`: time that moves only when the test moves it (expiry, ttl, idle sweeps)."""

from __future__ import annotations


class ManualClock:
    """Called, it answers `now`; `advance(seconds)` moves it on."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
