"""The kit every public battery is built from (the store's and the conversation state's).

Owns what a case raises to fail (`CaseFailed`, through `check`, `equal`, `raises`), the bounded
wait on a case's child processes (`reap`), the clock a battery moves (`OffsetClock`) and how a
case's run becomes its outcome (`outcome`). The law: no case can quietly disappear. A case that
raised failed; one its harness declared (with a reason) is reported `declared` when it fails and
`stale` when it passes, so a declaration that no longer holds fails the report too. Nothing here
imports a test framework.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from typing import Literal

from byref.errors import DeveloperError

Outcome = Literal["passed", "failed", "not-applicable", "declared", "stale"]
"""How a case went: not-applicable is the store battery's (an optional member absent)."""
PROCESS_TIMEOUT = 180.0
"""Seconds a case waits for a child process before it kills it and fails."""


class CaseFailed(DeveloperError):
    """A law did not hold."""


def check(ok: bool, what: str) -> None:
    """Raise CaseFailed saying `what` unless `ok`."""
    if not ok:
        raise CaseFailed(what)


def equal(got: object, want: object, what: str) -> None:
    """Raise CaseFailed naming both values unless `got == want`."""
    if got != want:
        raise CaseFailed(f"{what}: expected {want!r}, got {got!r}")


def raises(error: type[Exception], call: Callable[[], object], what: str) -> Exception:
    """The `error` that `call` raised; CaseFailed when it raised nothing."""
    try:
        call()
    except error as exc:
        return exc
    raise CaseFailed(f"{what}: expected {error.__name__}, nothing was raised")


def reap(procs: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Join each process (killed if it overstays PROCESS_TIMEOUT, then CaseFailed)."""
    for proc in procs:
        proc.join(PROCESS_TIMEOUT)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
            raise CaseFailed(f"child process {proc.pid} overstayed {PROCESS_TIMEOUT:.0f}s")


class OffsetClock:
    """Real time plus an offset the battery can advance (expiry cases move it)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        """Now, by this clock."""
        return time.time() + self.offset


def outcome(error: str | None, declared: str | None) -> tuple[Outcome, str]:
    """(outcome, detail) of a case that ended with `error` (None: it passed), given the reason
    its harness declared it with (None: not declared)."""
    if declared is not None:
        if error is None:
            return "stale", f"declared ({declared}) but now passes: remove the declaration"
        return "declared", f"{declared} [{error}]"
    return ("passed", "") if error is None else ("failed", error)
