"""Typed events: every event byref's layers emit in a real run converts to its own frozen
dataclass with no field left over, and the trace line is unchanged."""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import pytest

import byref
from byref.discovery import Catalog, Discovery
from byref.events import (
    EVENT_TYPES,
    ActivatedEvent,
    CoveredEvent,
    Emitter,
    Event,
    EventName,
    EvictedEvent,
    ExpiredEvent,
    MemorySink,
    MintedEvent,
    PlacedEvent,
    PresentedEvent,
    RefusedEvent,
    ResolvedEvent,
    SearchedEvent,
)
from byref.harness import Harness, Limits, ScriptedModel, call, last_result, say
from byref.store import MemoryStore, PutOptions, Retention, Scope

ROWS = [{"id": i, "pad": "x" * 80} for i in range(600)]


@byref.tool
def export() -> list[dict[str, Any]]:
    """Every row (large: placed)."""
    return ROWS


@byref.tool
def count(rows: list[dict[str, Any]]) -> int:
    """Count rows."""
    return len(rows)


def test_a_run_emits_only_events_its_dataclasses_fully_describe() -> None:
    sink = MemorySink()
    emit = Emitter(sink)
    catalog = Catalog([count])
    model = ScriptedModel([
        call("search_tools", {"query": "count rows"}),
        call("activate_tool", {"names": ["count"]}),
        call("export", {}),
        call("count", lambda r: {"rows": last_result(r)["value"]}),
        call("present", {"ref": "art_0000000000000000000000", "as": "table"}),
        call("count", {"rows": "not rows"}),
        say("done"),
    ])
    h = Harness(model, [export], emit=emit,
                discovery=Discovery(catalog, emit=emit), limits=Limits(budget=200_000))
    assert h.run_sync("go").text == "done"
    clock = [1000.0]
    store = MemoryStore(retention=Retention(max_count_per_scope=1), clock=lambda: clock[0],
                        emit=emit)
    scope = Scope("t")
    first = store.put(scope, b"one", PutOptions(kind="note/x", ttl=5))
    store.put(scope, b"two", PutOptions(kind="note/x", ttl=5))  # evicts the first
    clock[0] += 10
    assert store.get(scope, first.ref) is None
    meta = store.put(scope, b"three", PutOptions(kind="note/x"))
    Harness(ScriptedModel([call("present", {"ref": meta.ref, "as": "text"}), say("ok")]), [],
            store=store, scope=scope, emit=emit).run_sync("show")

    typed = sink.typed()
    kinds = {type(t) for t in typed}
    assert {MintedEvent, PlacedEvent, ResolvedEvent, SearchedEvent, ActivatedEvent,
            RefusedEvent, CoveredEvent, EvictedEvent, ExpiredEvent, PresentedEvent} <= kinds
    leftovers = {(type(t).__name__, k) for t in typed for k in t.extra}
    assert leftovers == set()
    for event, t in zip(sink.events, typed, strict=True):
        assert isinstance(t, EVENT_TYPES[event.name]) and t.at == event.at
        back = {k: v for k, v in dataclasses.asdict(t).items() if k not in ("at", "extra")}
        assert {k: v for k, v in back.items() if k in event.data} == event.data
    reasons = {t.reason for t in typed if isinstance(t, RefusedEvent)}
    assert {"missing-or-expired", "invalid-input"} <= reasons
    [presented] = [t for t in typed if isinstance(t, PresentedEvent)]
    assert (presented.ref, presented.as_) == (meta.ref, "text")


def test_every_event_name_has_one_dataclass_and_unknown_fields_are_kept() -> None:
    assert set(EVENT_TYPES) == set(get_args(EventName))
    assert len(set(EVENT_TYPES.values())) == len(EVENT_TYPES)
    event = Event("expired", 1.5, {"ref": "art_x", "scope": "t", "why": "clock"})
    typed = event.typed()
    assert typed == ExpiredEvent(at=1.5, ref="art_x", scope="t", extra={"why": "clock"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        typed.ref = "other"  # type: ignore[misc]
