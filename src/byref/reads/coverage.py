"""Coverage arithmetic: which records a read delivered, and the facts that say so.

Owns the pure part of a read: a sequence of source items (parsed records, or parse failures at
their positions) plus a selection (offset, limit, fields) and two limits (entries, bytes) become
the delivered records and a `Coverage`. No I/O.

The law: every fact is computed from what actually happened, never inferred. Records are
delivered whole or not at all (a byte budget that would cut one stops before it); every source
position in the examined range is either delivered or counted as filtered, with its gap; a read
that did not deliver its whole selection says `inputComplete: false` and why; equal counts do not
hide a duplicated or missing identity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from byref.errors import InvalidValue
from byref.jsonview import encode

MAX_LISTED_IDS: Final = 50
"""Ids named per list (missing, duplicated); the counts are always exact."""

# The order `reason` picks from: losses the model did not choose first, its own paging last.
REASON_ORDER: Final = (
    "parse_error", "filtered", "identity_mismatch", "source_incomplete", "byte_limit",
    "entry_limit", "page",
)


@dataclass(frozen=True, slots=True)
class Item:
    """One source position: a parsed record, or the reason it could not be parsed."""

    value: Any = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Expected:
    """What the source itself declared about its population (an upstream total or id list)."""

    total: int | None = None
    ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """Source positions [start, end) that were examined but not delivered, and why."""

    start: int
    end: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        """The gap as JSON: where it starts and ends, and why."""
        return {"start": self.start, "end": self.end, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Coverage:
    """What a read covered of a result: rows requested, loaded and in all, the range, gaps, and
    whether the input was read completely."""
    requested: int
    loaded: int
    total: int
    start: int
    stop: int
    """The examined range is [start, stop): every position in it was delivered or filtered."""
    has_more: bool
    byte_complete: bool
    filtered_count: int
    input_complete: bool
    reasons: tuple[str, ...]
    gaps: tuple[Gap, ...] = ()
    missing_ids: tuple[str, ...] = ()
    missing_id_count: int = 0
    duplicate_ids: tuple[str, ...] = ()
    records_bytes: int = 0

    @property
    def reason(self) -> str | None:
        """The first reason the read is incomplete, or None when it is complete."""
        return self.reasons[0] if self.reasons else None

    @property
    def whole(self) -> bool:
        """True only when the read delivered the entire result, nothing lost or left unread."""
        return self.input_complete and self.start == 0 and not self.has_more

    def to_json(self) -> dict[str, Any]:
        """The coverage as the model sees it (camelCase keys)."""
        out: dict[str, Any] = {
            "requested": self.requested, "loaded": self.loaded, "total": self.total,
            "range": [self.start, self.stop], "hasMore": self.has_more,
            "byteComplete": self.byte_complete, "filteredCount": self.filtered_count,
            "inputComplete": self.input_complete, "reason": self.reason,
        }
        if len(self.reasons) > 1:
            out["reasons"] = list(self.reasons)
        if self.gaps:
            out["gaps"] = [g.to_json() for g in self.gaps]
        if self.missing_id_count:
            out["missingIds"] = list(self.missing_ids)
            out["missingIdCount"] = self.missing_id_count
        if self.duplicate_ids:
            out["duplicateIds"] = list(self.duplicate_ids)
        return out


@dataclass
class Selection:
    """The records a read selected, its coverage, and how often each requested field was missing."""
    records: list[Any]
    coverage: Coverage
    missing_fields: dict[str, int] = field(default_factory=dict)
    """Requested field → how many delivered records lack it (delivered anyway, never dropped)."""


def select(
    items: Sequence[Item],
    *,
    offset: int = 0,
    limit: int | None = None,
    fields: Sequence[str] | None = None,
    max_entries: int | None = None,
    max_bytes: int | None = None,
    id_field: str | None = None,
    expected: Expected | None = None,
) -> Selection:
    """Deliver the selection [offset, offset+limit) of `items` within the two limits."""
    if offset < 0:
        raise InvalidValue(f"offset must be >= 0, got {offset!r}")
    if limit is not None and limit < 0:
        raise InvalidValue(f"limit must be >= 0, got {limit!r}")
    total = len(items)
    start = min(offset, total)
    requested = limit if limit is not None else total - start
    window_end = min(total, start + requested)
    records: list[Any] = []
    delivered_ids: list[str] = []
    missing_fields: dict[str, int] = {}
    gaps: list[Gap] = []
    reasons: set[str] = set()
    used = 2  # the enclosing brackets of the records array
    position = start
    byte_complete = True
    while position < window_end:
        if max_entries is not None and len(records) >= max_entries:
            reasons.add("entry_limit")
            break
        item = items[position]
        if item.error is not None or (fields and not isinstance(item.value, dict)):
            why = "parse_error" if item.error is not None else "filtered"
            reasons.add(why)
            _add_gap(gaps, position, why)
            position += 1
            continue
        record = _project(item.value, fields, missing_fields)
        size = len(encode(record)) + (1 if records else 0)
        if max_bytes is not None and used + size > max_bytes:
            # Stop before the record that would not fit: never half a record delivered as whole.
            reasons.add("byte_limit")
            byte_complete = False
            break
        used += size
        records.append(record)
        if id_field is not None:
            ident = _ident(item.value, id_field)
            if ident is not None:
                delivered_ids.append(ident)
        position += 1
    stop = position
    filtered = sum(g.end - g.start for g in gaps)
    missing: list[str] = []
    if id_field is not None:
        # Ids the selection asked for but did not receive (cut by a limit), in source order.
        for item in items[stop:window_end]:
            ident = _ident(item.value, id_field) if item.error is None else None
            if ident is not None:
                missing.append(ident)
    counts = Counter(delivered_ids)
    duplicates = sorted(i for i, n in counts.items() if n > 1)
    if duplicates:
        reasons.add("identity_mismatch")
    whole_window = start == 0 and window_end == total
    if expected is not None:
        if expected.ids is not None and whole_window and stop == window_end:
            present = set(delivered_ids)
            absent = [i for i in expected.ids if i not in present]
            if absent:
                reasons.add("identity_mismatch")
                missing.extend(i for i in absent if i not in missing)
        if expected.total is not None and total < expected.total:
            reasons.add("source_incomplete")
    if stop < total or start > 0:
        reasons.add("page")
    # A page the model chose is a complete selection; `page` (and `hasMore`) say it is partial.
    input_complete = stop == window_end and not (reasons - {"page"})
    coverage = Coverage(
        requested=requested, loaded=len(records), total=total, start=start, stop=stop,
        has_more=stop < total, byte_complete=byte_complete, filtered_count=filtered,
        input_complete=input_complete,
        reasons=tuple(r for r in REASON_ORDER if r in reasons), gaps=tuple(gaps),
        missing_ids=tuple(missing[:MAX_LISTED_IDS]), missing_id_count=len(missing),
        duplicate_ids=tuple(duplicates[:MAX_LISTED_IDS]), records_bytes=used,
    )
    return Selection(records, coverage, missing_fields)


def _add_gap(gaps: list[Gap], position: int, reason: str) -> None:
    last = gaps[-1] if gaps else None
    if last is not None and last.end == position and last.reason == reason:
        gaps[-1] = Gap(last.start, position + 1, reason)
    else:
        gaps.append(Gap(position, position + 1, reason))


def _project(value: Any, fields: Sequence[str] | None, missing: dict[str, int]) -> Any:
    if not fields:
        return value
    out = {}
    for name in fields:
        if name in value:
            out[name] = value[name]
        else:
            missing[name] = missing.get(name, 0) + 1
    return out


def _ident(value: Any, id_field: str) -> str | None:
    if isinstance(value, dict) and id_field in value and value[id_field] is not None:
        return str(value[id_field])
    return None
