"""The battery itself can fail: broken stores break exactly the laws they break, and no case can
quietly disappear (missing hooks fail, passing declarations go STALE, unknown names are refused)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

import byref.store.kit as kit
from byref.store import (
    Artifact,
    ArtifactMeta,
    ArtifactPage,
    MemoryStore,
    PutOptions,
    Scope,
)
from byref.store.conformance.runner import (
    CASES,
    StoreBattery,
    format_report,
    run_case,
    run_conformance,
)


def _case(name: str):  # type: ignore[no-untyped-def]
    return next(c for c in CASES if c.name == name)


class FoldingStore(MemoryStore):
    """Folds letter case in scopes, as a case-insensitive disk would."""

    def _fold(self, scope: Scope) -> Scope:
        return Scope(scope.tenant.lower(), scope.principal.lower(), scope.conversation.lower())

    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        return super().put(self._fold(scope), data, options)

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        return super().head(self._fold(scope), ref)

    def list(self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
             limit: int | None = None) -> ArtifactPage:
        return super().list(self._fold(scope), kind, cursor=cursor, limit=limit)


class StubStreamStore(MemoryStore):
    def put_stream(self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int,
                   options: PutOptions) -> ArtifactMeta:
        raise NotImplementedError


class LeakyAbsenceStore(MemoryStore):
    """Tells 'not yours' apart from 'missing': an oracle across scopes."""

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        if ref in self._owner and self._owner[ref] != scope:
            raise PermissionError(f"{ref} belongs to another scope")
        return super().get(scope, ref)


class FiveVerbsOnly:
    """A store with no streaming members at all."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.put, self.head, self.get = self._inner.put, self._inner.head, self._inner.get
        self.delete, self.list, self.close = self._inner.delete, self._inner.list, lambda: None


def harness(factory: Callable[[], object], **kw: object) -> StoreBattery:
    return StoreBattery(name="under-test", create_store=factory, **kw)  # type: ignore[arg-type]


def test_case_folding_breaks_look_alike_scopes() -> None:
    result = run_case(_case("look-alike-scopes-stay-apart"), harness(FoldingStore))
    assert result.outcome == "failed"
    assert "list of Scope(" in result.detail


def test_stub_streaming_member_is_caught() -> None:
    result = run_case(_case("streaming-members-never-faked"), harness(StubStreamStore))
    assert result.outcome == "failed"
    assert result.detail == "CaseFailed: put_stream is present but raises NotImplementedError"


def test_an_absence_oracle_is_caught() -> None:
    result = run_case(_case("one-absence"), harness(LeakyAbsenceStore))
    assert result.outcome == "failed"
    assert result.detail.startswith("PermissionError: ")


def test_derived_refs_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kit, "mint_key", lambda: "art_" + "0" * 22)
    result = run_case(_case("refs-minted-not-derived"), harness(MemoryStore))
    assert result.outcome == "failed"
    assert "distinct refs for the same bytes put three times: expected 3, got 1" in result.detail


def test_absent_streaming_members_are_not_applicable() -> None:
    report = run_conformance(harness(FiveVerbsOnly, advance_time=lambda s, t: None))
    outcomes = {r.name: r.outcome for r in report.results}
    for name in ("streaming-round-trip", "streamed-size-mismatch-refused",
                 "interrupted-stream-leaves-nothing", "crash-mid-put-invisible"):
        assert outcomes[name] == "not-applicable"
    assert outcomes["streaming-members-never-faked"] == "passed"


def test_missing_hook_nobody_declared_fails() -> None:
    result = run_case(_case("corrupt-refused-by-get"), harness(MemoryStore))
    assert result.outcome == "failed"
    assert result.detail == (
        "case 'corrupt-refused-by-get' needs the harness hook 'corrupt', which was not supplied; "
        "supply the hook, or declare the case with a reason")


def test_declared_case_that_passes_is_stale_and_fails_the_report() -> None:
    h = harness(MemoryStore, declared={"round-trip": "we thought it broken"})
    report = run_conformance(h, cases=[_case("round-trip")])
    assert report.results[0].outcome == "stale"
    assert not report.ok
    assert "STALE" in format_report(report)


def test_declared_case_still_runs_and_is_reported_with_its_reason() -> None:
    h = harness(MemoryStore, declared={"corrupt-refused-by-get": "payloads are private"})
    result = run_case(_case("corrupt-refused-by-get"), h)
    assert result.outcome == "declared"
    assert result.detail.startswith("payloads are private [")


def test_unknown_or_reasonless_declarations_are_refused() -> None:
    with pytest.raises(ValueError, match=r"declares unknown case 'round-trips'; case names are: "):
        harness(MemoryStore, declared={"round-trips": "typo"})
    with pytest.raises(ValueError, match=r"declares 'round-trip' without a reason"):
        harness(MemoryStore, declared={"round-trip": " "})


def test_failure_text_prints_the_law() -> None:
    report = run_conformance(harness(FoldingStore), cases=[_case("look-alike-scopes-stay-apart")])
    text = format_report(report)
    assert "FAIL  look-alike-scopes-stay-apart" in text
    assert "law: Scopes differing only in case" in text
    assert text.splitlines()[-1] == "FAIL: 1 failed"


def test_battery_imports_no_test_framework() -> None:
    import byref.store.conformance._cases as cases
    import byref.store.conformance._cases_streams as streams
    import byref.store.conformance.runner as conformance

    for module in (cases, streams, conformance):
        source = Path(module.__file__ or "").read_text()
        assert "pytest" not in source and "unittest" not in source and "hypothesis" not in source
