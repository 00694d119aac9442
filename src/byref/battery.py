"""The kit every public battery is built from (the store's, the conversation state's, the refs
extension's).

Owns what a case raises to fail (`CaseFailed`, through `check`, `equal`, `raises`), the bounded
wait on a case's child processes (`reap`), the clock a battery moves (`OffsetClock`), how a
case's run becomes its outcome (`outcome`), and the result and report every battery answers
(`CaseResult`, `Report`, `format_report`). The law: no case can quietly disappear. A case that
raised failed; one its harness declared (with a reason) is reported `declared` when it fails and
`stale` when it passes, so a declaration that no longer holds fails the report too. Nothing here
imports a test framework.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

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


@dataclass(frozen=True)
class CaseResult:
    """One case's outcome, with the law it holds, why it did not pass, and its time."""

    name: str
    law: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """This result as JSON."""
        return {"case": self.name, "law": self.law, "outcome": self.outcome,
                "detail": self.detail, "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Report:
    """Every case's result for one subject (a store's harness, a server under the battery)."""

    subject: str
    results: tuple[CaseResult, ...]

    @property
    def ok(self) -> bool:
        """Whether no case failed or went stale."""
        return all(r.outcome not in ("failed", "stale") for r in self.results)

    def counts(self) -> dict[str, int]:
        """How many cases had each outcome."""
        out: dict[str, int] = {}
        for r in self.results:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out

    def outcomes(self) -> dict[str, str]:
        """Case name → outcome."""
        return {r.name: r.outcome for r in self.results}

    def to_json(self) -> dict[str, Any]:
        """The report as JSON: the subject, outcome counts and every case."""
        return {"subject": self.subject, "ok": self.ok, "counts": self.counts(),
                "cases": [r.to_json() for r in self.results]}


_MARKS = {"passed": "ok  ", "failed": "FAIL", "not-applicable": "n/a ", "declared": "decl",
          "stale": "STALE"}


def format_report(report: Report, title: str, *, detail_chars: int | None = None) -> str:
    """The report as text under `title`: one line a case, the law and reason under each that did
    not pass (the reason cut at `detail_chars`), then PASS or FAIL with the counts."""
    lines = [f"{title}: {report.subject}"]
    for r in report.results:
        lines.append(f"  {_MARKS[r.outcome]:5} {r.name}  ({r.seconds:.2f}s)")
        if r.outcome != "passed":
            lines.append(f"        law: {r.law}")
            if r.detail:
                lines.append(f"        why: {r.detail[:detail_chars]}")
    counts = ", ".join(f"{n} {k}" for k, n in sorted(report.counts().items()))
    lines.append(f"{'PASS' if report.ok else 'FAIL'}: {counts}")
    return "\n".join(lines)
