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

EventName = Literal[
    "minted", "resolved", "placed", "presented", "refused", "expired", "evicted",
    "searched", "activated", "covered", "learned",
]


@dataclass(frozen=True, slots=True)
class Event:
    name: EventName
    at: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"event": self.name, "at": self.at, **self.data}


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class MemorySink:
    """Keeps events in a list: for tests, the lens, and a harness that wants to inspect its run."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def named(self, name: EventName) -> list[Event]:
        return [e for e in self.events if e.name == name]


class JsonLinesSink:
    """Appends one JSON object per event to a file (the trace the lens and operators read)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()

    def emit(self, event: Event) -> None:
        line = self._encoder.encode(event.to_json()) + b"\n"
        with self._lock, self.path.open("ab") as fh:
            fh.write(line)


class NullSink:
    def emit(self, event: Event) -> None:
        return None


class Emitter:
    """What layers hold: a sink plus a clock, so call sites say only what happened."""

    def __init__(self, sink: EventSink | None = None, clock: Callable[[], float] = time.time):
        self.sink: EventSink = sink if sink is not None else NullSink()
        self.clock = clock

    def __call__(self, name: EventName, **data: Any) -> None:
        self.sink.emit(Event(name, self.clock(), data))
