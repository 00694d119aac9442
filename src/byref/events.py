"""Typed events and their sinks: metadata only, never payload bytes.

Owns the operator's view of what happened (minted, resolved, placed, presented, refused, expired,
searched, activated). The law: an event carries refs, kinds, sizes and reasons; it never carries
the bytes or the values behind a ref, so a trace can be shared without leaking data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from byref.errors import RefusalReason

EventName = Literal[
    "minted", "resolved", "placed", "presented", "refused", "expired", "evicted",
    "searched", "activated", "covered", "learned", "task",
]


@dataclass(frozen=True, slots=True)
class Event:
    """One event as emitted: its name, when, and its fields (see `typed()` for their types)."""

    name: EventName
    at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The trace line: `{"event": name, "at": …, **fields}`."""
        return {"event": self.name, "at": self.at, **self.data}

    def typed(self) -> TypedEvent:
        """This event as its own frozen dataclass (`MintedEvent`, `RefusedEvent`, …); fields
        that class does not name are kept in its `extra`."""
        cls = EVENT_TYPES[self.name]
        names = {f for f in cls.__dataclass_fields__ if f not in ("at", "extra")}
        given = {("as_" if k == "as" else k): v for k, v in self.data.items()}
        known = {k: v for k, v in given.items() if k in names}
        extra = {k: v for k, v in given.items() if k not in names}
        return cls(at=self.at, **known, extra=extra)


# -- one frozen dataclass per event: what each carries (metadata only, never payload bytes) -----
@dataclass(frozen=True, slots=True, kw_only=True)
class _Typed:
    at: float
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields the emitting layer added that this class does not name (none, today)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MintedEvent(_Typed):
    """A store minted an artifact: its `art_` ref, scope, kind and size."""

    ref: str
    scope: str
    kind: str
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedEvent(_Typed):
    """A ref was delivered: by the resolver (`ref_type`, `scope`) or staged for run_python
    (`tool`, `staged_as`, `bytes`)."""

    ref: str | None = None
    ref_type: str = ""
    scope: str = ""
    tool: str = ""
    staged_as: str = ""
    bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedEvent(_Typed):
    """A result too large to insert was stored; the model saw a preview and `ref`."""

    tool: str
    ref: str
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PresentedEvent(_Typed):
    """An artifact was shown to the user (`present`), as `as_` (the trace's `as`)."""

    ref: str
    kind: str
    bytes: int
    as_: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusedEvent(_Typed):
    """Something was refused or absent: `reason` is the short code, `op` the stage (dispatch,
    validate, record, ceiling, net, present, run; empty for a store's absence)."""

    reason: RefusalReason
    op: str = ""
    tool: str = ""
    call_id: str = ""
    ref: str | None = None
    scope: str = ""
    cause: str = ""
    detail: str | None = None
    bytes: int | None = None
    enforced: bool | None = None
    code: str | None = None
    """A tool's own code for declining (`ToolRefusal(code=...)`); `reason` stays byref's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpiredEvent(_Typed):
    """An artifact passed its expiry and was dropped."""

    ref: str
    scope: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictedEvent(_Typed):
    """Retention dropped an artifact to make room."""

    ref: str
    scope: str
    reason: str = "retention"


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchedEvent(_Typed):
    """A tool search: the query, its filters, how many matched and what was shown."""

    query: str
    also: list[str] = field(default_factory=list)
    """The other phrasings the model gave (`search_tools(also=...)`), fused with the query."""
    filters: dict[str, Any] = field(default_factory=dict)
    candidates: int = 0
    matched: int = 0
    results: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivatedEvent(_Typed):
    """Tools were activated into the working set."""

    names: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class CoveredEvent(_Typed):
    """A budgeted request was checked: its bytes, the budget, results replaced so far, and
    what the current turn's results carry."""

    request_bytes: int
    budget: int
    replaced: int
    current: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnedEvent(_Typed):
    """The catalog learned from a usage log (or could not: `error`)."""

    usage: str
    evidence: int | None = None
    tools: int | None = None
    unknown: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent(_Typed):
    """An MCP task of the gateway changed status (`created`, `input_required`, `working`,
    `completed`, `failed`, `cancelled`): the first characters of its id (never the whole, an
    owner's secret), its owner's scope and tool, seconds since it was created, and a failure's
    words (`error`)."""

    task: str
    status: str
    scope: str = ""
    tool: str = ""
    seconds: float | None = None
    error: str | None = None


TypedEvent = (MintedEvent | ResolvedEvent | PlacedEvent | PresentedEvent | RefusedEvent
              | ExpiredEvent | EvictedEvent | SearchedEvent | ActivatedEvent | CoveredEvent
              | LearnedEvent | TaskEvent)
EVENT_TYPES: dict[EventName, type[TypedEvent]] = {
    "minted": MintedEvent, "resolved": ResolvedEvent, "placed": PlacedEvent,
    "presented": PresentedEvent, "refused": RefusedEvent, "expired": ExpiredEvent,
    "evicted": EvictedEvent, "searched": SearchedEvent, "activated": ActivatedEvent,
    "covered": CoveredEvent, "learned": LearnedEvent, "task": TaskEvent,
}
"""Each event name's dataclass: one per event, the whole closed set."""


class EventSink(Protocol):
    """Where events go: anything with `emit(event)`."""

    def emit(self, event: Event) -> None:
        """Record one event; must not raise for a well-formed event."""


class MemorySink:
    """Keeps events in a list: for tests, the lens, and a harness that wants to inspect its run."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        """Keep the event in `events` (thread-safe)."""
        with self._lock:
            self.events.append(event)

    def named(self, name: EventName) -> list[Event]:
        """The events called `name`, in order."""
        return [e for e in self.events if e.name == name]

    def typed(self) -> list[TypedEvent]:
        """Every event as its dataclass, in order (`isinstance` picks the kind)."""
        return [e.typed() for e in self.events]


class JsonLinesSink:
    """Appends one JSON object per event to a file (the trace the lens and operators read)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()

    def emit(self, event: Event) -> None:
        """Append the event as one JSON line to the file."""
        line = self._encoder.encode(event.to_json()) + b"\n"
        with self._lock, self.path.open("ab") as fh:
            fh.write(line)


class NullSink:
    """A sink that drops every event (the default when nobody listens)."""
    def emit(self, event: Event) -> None:
        """Drop the event."""
        return None


class Emitter:
    """What layers hold: a sink plus a clock, so call sites say only what happened."""

    def __init__(self, sink: EventSink | None = None, clock: Callable[[], float] = time.time):
        self.sink: EventSink = sink if sink is not None else NullSink()
        self.clock = clock

    def __call__(self, name: EventName, **data: Any) -> None:
        """Emit event `name` with `data`, stamped with this emitter's clock."""
        self.sink.emit(Event(name, self.clock(), data))
