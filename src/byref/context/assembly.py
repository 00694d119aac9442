"""Request assembly under a byte budget: compact settled tool groups, never a current read.

Owns the choice of what each request carries. The caller (the harness) supplies `build` (messages
→ the request object it will send) and `measure` (that object → bytes); the assembler decides
which result bodies become exact-reread stubs, builds the request, and checks the budget on that
very object. The law:
- the original question, every user and assistant text, and the latest tool group stay whole;
- when a request would exceed the budget, the oldest fully settled groups are replaced first,
  down to a low-water mark, so replacements come in batches and most turns add none;
- once a result is replaced it stays replaced on every later turn (a stub's bytes depend only on
  the part), so between replacements each request's prefix is byte-identical to the last one's
  and the provider's prefix cache keeps hitting; the live-handles note is the varying suffix;
- if it still does not fit, assembly raises `ContextBudgetError` naming the budget and what would
  not fit: a current read is never silently shortened;
- what of each current selection reached the request is recorded as a `covered` event.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from byref.context.groups import Address, Group, apply, groups, replaceable, with_note
from byref.context.handles import live_handles_note
from byref.errors import DeveloperError, InvalidValue
from byref.events import Emitter, EventName
from byref.store import ArtifactStore, Scope
from byref.transcript import Message

R = TypeVar("R")

# Not yet in `byref.events.EventName`; the integrator is asked to add it there.
COVERED: Final[EventName] = "covered"


class ContextBudgetError(DeveloperError, RuntimeError):
    """The request cannot fit its budget without shortening what must stay whole."""


@dataclass(frozen=True, slots=True)
class RequestBudget:
    """The byte budget of one model request, and the fill level past which old results are
    replaced by refs."""
    max_bytes: int
    """The most bytes one request may carry (system, declarations and every message)."""
    low_water: float = 0.6
    """When compaction runs, it replaces groups until the request is at most this share."""
    note_bytes: int = 2_048
    """Cap on the live-handles note."""
    reserve_bytes: int = 2_048
    """Kept back from a read's room for the turn's own call blocks and framing."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_bytes, int) or self.max_bytes <= 0:
            raise InvalidValue(f"RequestBudget.max_bytes must be a positive integer, "
                             f"got {self.max_bytes!r}")
        if not 0 < self.low_water <= 1:
            raise InvalidValue(f"RequestBudget.low_water must be in (0, 1], got {self.low_water!r}")


@dataclass(frozen=True)
class Assembled(Generic[R]):
    """One request fitted to its budget: the request, its size, which result groups are replaced
    (and which newly), a note for the model, and the room left."""
    request: R
    bytes: int
    budget: int
    replaced_groups: tuple[int, ...]
    """Indexes of every group whose results are replaced in this request."""
    new_groups: tuple[int, ...]
    """Those replaced for the first time in this request (a prefix change)."""
    note: str | None
    room: int


class Room:
    """The read room: how many bytes the next request can still take (a `ReadRoom`)."""

    def __init__(self) -> None:
        self._left: int | None = None

    def available(self) -> int | None:
        """Bytes still free in this request, or None when unbounded."""
        return self._left

    def consume(self, n: int) -> None:
        """Count `n` bytes against the room (never below zero)."""
        if self._left is not None:
            self._left = max(0, self._left - n)

    def reset(self, n: int | None) -> None:
        """Start again with `n` bytes free (None: unbounded)."""
        self._left = None if n is None else max(0, n)


class ContextAssembler:
    """Fits a conversation into a `RequestBudget`, replacing the oldest tool results by refs; a
    replacement stays replaced so the request prefix stays stable."""
    def __init__(
        self, budget: RequestBudget | int, *, store: ArtifactStore | None = None,
        scope: Scope | None = None, emit: Emitter | None = None,
    ) -> None:
        self.budget = budget if isinstance(budget, RequestBudget) else RequestBudget(budget)
        self.store = store
        self.scope = scope
        self.emit = emit or Emitter()
        self.room = Room()
        self._replaced: dict[Address, int] = {}
        """Sticky: every replaced result, with the index of its group."""

    @property
    def replaced(self) -> frozenset[Address]:
        """Every result address replaced by a ref so far."""
        return frozenset(self._replaced)

    def assemble(
        self, messages: Sequence[Message], *, build: Callable[[list[Message]], R],
        measure: Callable[[R], int], text_of: Callable[[R], str] | None = None,
    ) -> Assembled[R]:
        """The request to send now: built, measured and checked against the budget."""
        messages = list(messages)
        all_groups = groups(messages)
        latest = all_groups[-1] if all_groups else None
        protected = set(latest.results) if latest is not None else set()
        candidates = [g for g in all_groups if g.settled and g is not latest
                      and any(a not in self._replaced for a in self._eligible(g, messages))]
        new: list[int] = []
        request, size, note = self._build(messages, build, measure)
        if size > self.budget.max_bytes:
            target = int(self.budget.max_bytes * self.budget.low_water)
            for group in candidates:
                if size <= target:
                    break
                for address in self._eligible(group, messages):
                    assert address not in protected
                    self._replaced.setdefault(address, group.index)
                new.append(group.index)
                request, size, note = self._build(messages, build, measure)
        if size > self.budget.max_bytes:
            raise ContextBudgetError(self._overflow(messages, latest, size, build, measure))
        self._cover(messages, latest, request, size, text_of)
        floor = self._floor(messages, all_groups, build, measure)
        room = self.budget.max_bytes - floor - self.budget.reserve_bytes
        self.room.reset(room)
        replaced_groups = tuple(sorted(set(self._replaced.values())))
        return Assembled(request, size, self.budget.max_bytes, replaced_groups, tuple(new),
                         note, max(0, room))

    # -- internals -----------------------------------------------------------------------------
    def _eligible(self, group: Group, messages: list[Message]) -> list[Address]:
        by_seq = {m.seq: m for m in messages}
        return [(seq, j) for seq, j in group.results
                if replaceable(by_seq[seq].parts[j], seq, j)]

    def _view(self, messages: list[Message], replaced: set[Address]) -> tuple[list[Message],
                                                                             str | None]:
        view = apply(messages, replaced)
        if not replaced:
            return view, None
        ordered = sorted(replaced)
        note = live_handles_note(messages, ordered, store=self.store, scope=self.scope,
                                 max_bytes=self.budget.note_bytes)
        return with_note(view, note), note

    def _build(self, messages: list[Message], build: Callable[[list[Message]], R],
               measure: Callable[[R], int]) -> tuple[R, int, str | None]:
        view, note = self._view(messages, set(self._replaced))
        request = build(view)
        return request, measure(request), note

    def _floor(self, messages: list[Message], all_groups: list[Group],
               build: Callable[[list[Message]], R], measure: Callable[[R], int]) -> int:
        """Bytes of the next request's smallest form: every group so far replaced (the latest
        one becomes settled once the model answers)."""
        everything = set(self._replaced)
        for group in all_groups:
            everything.update(self._eligible(group, messages))
        view, _ = self._view(messages, everything)
        return measure(build(view))

    def _cover(self, messages: list[Message], latest: Group | None, request: R, size: int,
               text_of: Callable[[R], str] | None) -> None:
        if latest is None:
            return
        sent = text_of(request) if text_of is not None else None
        by_seq = {m.seq: m for m in messages}
        parts: list[dict[str, Any]] = []
        for seq, j in latest.results:
            part = by_seq[seq].parts[j]
            rendered = part.rendered or ""
            entry: dict[str, Any] = {
                "seq": seq, "part": j, "tool": part.tool, "bytes": len(rendered.encode()),
                "replaced": (seq, j) in self._replaced,
            }
            if sent is not None:
                entry["inRequest"] = rendered in sent
            value = part.value
            if isinstance(value, dict) and isinstance(value.get("coverage"), dict):
                cov = value["coverage"]
                entry["selection"] = {k: cov.get(k) for k in (
                    "requested", "loaded", "total", "range", "inputComplete", "reason")}
            parts.append(entry)
        self.emit(COVERED, request_bytes=size, budget=self.budget.max_bytes,
                  replaced=len(self._replaced), current=parts)

    def _overflow(self, messages: list[Message], latest: Group | None, size: int,
                  build: Callable[[list[Message]], R], measure: Callable[[R], int]) -> str:
        fixed = measure(build([]))
        pieces = [f"the system text and tool declarations ({fixed:,} bytes)"]
        if latest is not None:
            by_seq = {m.seq: m for m in messages}
            current = ", ".join(
                f"{by_seq[s].parts[j].tool} (message {s} part {j}, "
                f"{len((by_seq[s].parts[j].rendered or '').encode()):,} bytes)"
                for s, j in latest.results)
            if current:
                pieces.append(f"the latest tool group: {current}")
        return (
            f"The request needs {size:,} bytes but its budget is {self.budget.max_bytes:,} bytes, "
            f"and every older settled tool result is already replaced. What would not fit: "
            f"{'; '.join(pieces)}; plus the conversation's own text. A current read is never "
            "shortened to fit: raise the budget, or read less (a smaller limit, fewer fields, "
            "or max_bytes)."
        )
