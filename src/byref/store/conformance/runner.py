"""The public conformance battery: every adapter, ours or a user's, runs the same laws.

Owns the harness (a factory making a store, plus hooks for what the port has no verb for:
`advance_time`, `corrupt`, `rewrite`, `bounded_store`, and `reopen` for the two-process cases), the
runner,
the report and its text form. The law: no case can quietly disappear. Outcomes are passed, failed
(including "needed a hook nobody supplied or declared"), not-applicable (an optional member the
store does not implement) and declared (run anyway; reported STALE, which fails the report, once it
passes). Nothing here imports a test framework: a case raises to fail.

    report = run_conformance(StoreBattery(name="mine", create_store=lambda: MyStore(...)))
    if not report.ok:
        raise AssertionError(format_report(report))
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import get_args

from byref.battery import CaseResult, OffsetClock, Outcome, Report, outcome
from byref.battery import format_report as _format
from byref.errors import InvalidValue
from byref.store.conformance._cases import BASIC_CASES, Case, CaseName, Hook, HookMissing, Kit
from byref.store.conformance._cases_damage import DAMAGE_CASES
from byref.store.conformance._cases_streams import STREAM_CASES
from byref.store.port import ArtifactStore, Scope, can_get_stream, can_put_stream
from byref.store.retention import Retention

CASES: tuple[Case, ...] = (*BASIC_CASES, *DAMAGE_CASES, *STREAM_CASES)
"""Every case, in the order the report lists them."""


__all__ = [
    "CASES", "Case", "CaseName", "CaseResult", "Hook", "Kit", "Outcome", "Report",
    "StoreBattery", "battery_for_url", "format_report", "run_case",
    "run_conformance",
]


@dataclass(frozen=True)
class StoreBattery:
    """How the battery reaches a store. `create_store` must give a usable store each call (cases
    use their own unique scopes, so the storage behind it need not be empty)."""

    name: str
    create_store: Callable[[], ArtifactStore]
    dispose_store: Callable[[ArtifactStore], None] | None = None
    advance_time: Callable[[ArtifactStore, float], None] | None = None
    corrupt: Callable[[ArtifactStore, Scope, str], None] | None = None
    bounded_store: Callable[[int], ArtifactStore] | None = None
    reopen: Callable[[ArtifactStore], Callable[[], ArtifactStore]] | None = None
    """A picklable opener of the same storage, for a second process."""
    declared: Mapping[CaseName, str] = field(default_factory=dict)
    """Cases this store implements yet cannot satisfy, each with its reason."""
    large_bytes: int = 50 * 1024 * 1024
    rewrite: Callable[[ArtifactStore, Scope, str, bytes], None] | None = None
    """Replace a stored payload's bytes (any length), keeping its record: the damage cases."""

    def __post_init__(self) -> None:
        known = set(get_args(CaseName))
        for name, reason in self.declared.items():
            if name not in known:
                raise InvalidValue(
                    f"Store battery {self.name!r} declares unknown case {name!r}; case names are: "
                    f"{', '.join(sorted(known))}."
                )
            if not reason or not reason.strip():
                raise InvalidValue(
                    f"Store battery {self.name!r} declares {name!r} without a reason.")

    def dispose(self, store: ArtifactStore) -> None:
        """Dispose of a store the battery made (`dispose_store`, else `close`)."""
        (self.dispose_store or (lambda s: s.close()))(store)


def run_case(case: Case, harness: StoreBattery) -> CaseResult:
    """Run one case against a fresh store from the harness and classify the outcome."""
    started = time.perf_counter()
    store = harness.create_store()
    try:
        missing = [m for m in case.needs if not _has(store, m)]
        if missing:
            return CaseResult(case.name, case.law, "not-applicable",
                              f"optional member {missing[0]!r} is absent", 0.0)
        try:
            with _kit(case, harness, store) as kit:
                case.run(kit)
        except HookMissing as exc:
            error: str | None = str(exc) + (
                "" if case.name in harness.declared
                else "; supply the hook, or declare the case with a reason")
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        else:
            error = None
    finally:
        harness.dispose(store)
    seconds = time.perf_counter() - started
    got, detail = outcome(error, harness.declared.get(case.name))
    return CaseResult(case.name, case.law, got, detail, seconds)


def run_conformance(
    harness: StoreBattery, cases: Sequence[Case] = CASES,
    on_result: Callable[[CaseResult], None] | None = None,
) -> Report:
    """Run `cases` in order against the harness, calling `on_result` after each; returns the
    report."""
    results = []
    for case in cases:
        result = run_case(case, harness)
        if on_result is not None:
            on_result(result)
        results.append(result)
    return Report(harness.name, tuple(results))


def format_report(report: Report) -> str:
    """The report as text: one line a case, the law and reason under each that did not pass, then
    PASS or FAIL."""
    return _format(report, "Artifact store conformance")


def _has(store: ArtifactStore, member: str) -> bool:
    return can_put_stream(store) if member == "put_stream" else can_get_stream(store)


@contextmanager
def _kit(case: Case, harness: StoreBattery, store: ArtifactStore) -> Iterator[Kit]:
    extra: list[ArtifactStore] = []

    def bounded(max_bytes: int) -> ArtifactStore:
        if harness.bounded_store is None:
            raise HookMissing(_missing(case, "bounded_store"))
        made = harness.bounded_store(max_bytes)
        extra.append(made)
        return made

    kit = Kit(
        store=store, token=f"{case.name}-{secrets.token_hex(6)}", large_bytes=harness.large_bytes,
        advance=None if harness.advance_time is None else functools.partial(
            harness.advance_time, store),
        corrupt=None if harness.corrupt is None else functools.partial(harness.corrupt, store),
        rewrite=None if harness.rewrite is None else functools.partial(harness.rewrite, store),
        bounded=bounded if harness.bounded_store is not None else None,
        reopen=None if harness.reopen is None else harness.reopen(store),
        missing=lambda hook: _missing(case, hook),
    )
    try:
        yield kit
    finally:
        for made in extra:
            harness.dispose(made)


def _missing(case: Case, hook: Hook) -> str:
    return f"case {case.name!r} needs the harness hook {hook!r}, which was not supplied"


# -- harnesses for the adapters byref ships, by URL ---------------------------------------------
def battery_for_url(url: str, *, name: str | None = None) -> StoreBattery:
    """A harness for any URL `open_store` understands, with every hook byref can supply."""
    from byref.store.open import open_store

    clocks: dict[int, OffsetClock] = {}

    def create() -> ArtifactStore:
        clock = OffsetClock()
        store = open_store(url, clock=clock)
        clocks[id(store)] = clock
        return store

    def advance(store: ArtifactStore, seconds: float) -> None:
        clocks[id(store)].offset += seconds

    def bounded(max_bytes: int) -> ArtifactStore:
        return open_store(url, retention=Retention(max_bytes_per_scope=max_bytes))

    from byref.store.conformance.corruption import find_damage
    from byref.store.open import unknown_url
    from byref.store.schemes import find_scheme

    scheme = url.split(":", 1)[0]
    found = find_scheme(scheme)
    if found is None:  # say so before any case runs, as open_store would
        raise unknown_url(url)
    damage = find_damage(scheme)
    shared = scheme != "memory"
    declared: dict[CaseName, str] = {}
    if not shared:
        reason = "a memory store lives in one process; a second process cannot reach it"
        declared["concurrent-puts-two-processes"] = reason
        declared["crash-mid-put-invisible"] = reason
    return StoreBattery(
        name=name or url, create_store=create, advance_time=advance,
        corrupt=None if damage is None else damage.corrupt,
        rewrite=None if damage is None else damage.rewrite,
        bounded_store=bounded,
        reopen=(lambda store: functools.partial(open_store, url))
        if shared else None,
        declared=declared,
    )

