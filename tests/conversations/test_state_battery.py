"""The one conversation-state battery on memory, SQLite and PostgreSQL (one test per law), and
proof that the battery can fail: broken states break exactly the laws they break."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _state_urls import IMPLEMENTATIONS, url_for

from byref.conversations import MemoryConversations
from byref.conversations.conformance import (
    CASES,
    TTL,
    Case,
    StateBattery,
    battery_for_url,
    run_case,
)
from byref.conversations.port import ConversationState
from byref.store import Scope


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_law_holds(kind: str, case: Case, request: pytest.FixtureRequest,
                   tmp_path: Path) -> None:
    result = run_case(case, battery_for_url(url_for(kind, request, tmp_path)))
    if kind == "memory" and case.processes:
        assert result.outcome == "declared", result
        assert "memory state lives in one process" in result.detail
    else:
        assert result.outcome == "passed", f"{case.name}: {case.law}\n{result.detail}"


def test_memory_spill_keeps_the_laws(tmp_path: Path) -> None:
    clock = [1_000.0]

    def create() -> ConversationState:
        return MemoryConversations(ttl=TTL, spill=tmp_path, clock=lambda: clock[0])

    def advance(state: ConversationState, seconds: float) -> None:
        clock[0] += seconds

    harness = StateBattery("memory+spill", create=create, advance=advance)
    for case in CASES:
        if not case.processes:
            result = run_case(case, harness)
            assert result.outcome == "passed", f"{case.name}: {result.detail}"
    assert list(tmp_path.iterdir()) == []  # nameless files: nothing left in the directory


def _case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


class Overwriting(MemoryConversations):
    """Accepts an append at any seq by cutting the record back: a torn/replaced history."""

    def append(self, scope: Scope, first_seq: int, lines: Sequence[bytes], **kw: object
               ) -> None:
        record = self._records.get(scope)
        if record is not None and isinstance(record.lines, list):
            index = first_seq - record.conversation.origin
            if 0 <= index < len(record.lines):
                del record.lines[index:]
                from dataclasses import replace
                record.conversation = replace(record.conversation, length=index)
        super().append(scope, first_seq, lines, **kw)  # type: ignore[arg-type]


class Folding(MemoryConversations):
    """Folds conversation ids to lower case, as a case-insensitive key would."""

    def _fold(self, scope: Scope) -> Scope:
        return Scope(scope.tenant.lower(), scope.principal, scope.conversation.lower())

    def open(self, scope, origin):  # type: ignore[no-untyped-def]
        return super().open(self._fold(scope), origin)

    def find(self, scope):  # type: ignore[no-untyped-def]
        return super().find(self._fold(scope))

    def append(self, scope, first_seq, lines, **kw):  # type: ignore[no-untyped-def]
        return super().append(self._fold(scope), first_seq, lines, **kw)

    def lines(self, scope, first_seq, count):  # type: ignore[no-untyped-def]
        return super().lines(self._fold(scope), first_seq, count)


class Forgetful(MemoryConversations):
    """Expires a conversation without remembering the range it held."""

    def _expire(self, scope, record):  # type: ignore[no-untyped-def]
        super()._expire(scope, record)
        self._expired.pop(scope, None)


def _memory_harness(cls: type[MemoryConversations]) -> StateBattery:
    clock = [0.0]
    return StateBattery(cls.__name__, create=lambda: cls(ttl=TTL, clock=lambda: clock[0]),
                        advance=lambda s, t: clock.__setitem__(0, clock[0] + t))


def test_the_battery_catches_an_overwrite() -> None:
    result = run_case(_case("continues-exactly"), _memory_harness(Overwriting))
    assert result.outcome == "failed"
    assert result.detail == ("CaseFailed: an append at seq 10 (the record continues at 11) was "
                             "accepted")


def test_the_battery_catches_case_folding() -> None:
    result = run_case(_case("scopes-apart"), _memory_harness(Folding))
    assert result.outcome == "failed"
    assert result.detail.startswith("CaseFailed: find of look-alike Scope(")


def test_the_battery_catches_a_forgotten_expiry() -> None:
    result = run_case(_case("expiry"), _memory_harness(Forgetful))
    assert result.outcome == "failed"
    assert result.detail == ("CaseFailed: reopened after expiry: expected ((100, 101), 0, ()), "
                             "got (None, 0, ())")


def test_a_declared_case_that_passes_is_stale() -> None:
    harness = StateBattery("x", create=MemoryConversations, advance=lambda s, t: None,
                           declared={"round-trip": "thought broken"})
    assert run_case(_case("round-trip"), harness).outcome == "stale"


def test_battery_imports_no_test_framework() -> None:
    import byref.conversations.conformance as conformance

    source = Path(conformance.__file__ or "").read_text()
    assert "pytest" not in source and "hypothesis" not in source
