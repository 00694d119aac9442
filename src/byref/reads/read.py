"""One explicit read: a loaded source plus a selection becomes the answer `read_result` returns.

Owns the answer's shape: `records` (or `text`), `coverage` (the facts of `coverage.py`), `source`
(which version was read), `byteBudget` (the bound the read ran under and which limit set it) and
one `note` sentence for the model. The law: the answer as a whole fits the room the request has
left (the records are re-selected under a smaller bound until it does, never cut afterwards), and
the note says in words what the facts say: a partial read is never described as complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from byref.errors import InvalidValue
from byref.jsonview import encode
from byref.reads.coverage import Coverage, Expected, Item, select
from byref.reads.limits import ReadBudget, ReadLimits, read_budget
from byref.reads.versions import ResultVersion

_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class Source:
    """What a read reads: records (as items) or text, and where they came from."""

    items: Sequence[Item] | None = None
    text: str | None = None
    records_at: str = ""
    ref: Any = None
    """The art_ key read, or the `$ref` envelope the caller wrote (model-authorable types only)."""
    kind: str | None = None
    version: ResultVersion | None = None

    def __post_init__(self) -> None:
        if (self.items is None) == (self.text is None):
            raise InvalidValue("Source needs exactly one of items= or text=")


def read(
    source: Source, *, fields: Sequence[str] | None = None, offset: int = 0,
    limit: int | None = None, max_bytes: int | None = None, limits: ReadLimits | None = None,
    room: int | None = None,
) -> dict[str, Any]:
    """The answer to one read; its encoded size never exceeds `room` when a room is given."""
    limits = limits or ReadLimits()
    overhead = 0
    answer: dict[str, Any] = {}
    for _ in range(_ATTEMPTS):
        budget = read_budget(limits, max_bytes, room, overhead)
        answer = _answer(source, budget, fields=fields, offset=offset, limit=limit,
                         limits=limits)
        size = len(encode(answer))
        if room is None or size <= room:
            return answer
        # The frame around the records (coverage, ids, note) took more than guessed: shrink the
        # records' bound by what the frame really costs and select again.
        overhead = size - _body_bytes(answer) + 1
    return answer


def _answer(source: Source, budget: ReadBudget, *, fields: Sequence[str] | None, offset: int,
            limit: int | None, limits: ReadLimits) -> dict[str, Any]:
    answer: dict[str, Any] = {}
    if source.items is not None:
        version = source.version
        selection = select(
            source.items, offset=offset, limit=limit, fields=fields,
            max_entries=limits.explicit_read_entries, max_bytes=budget.bytes,
            id_field=version.id_field if version else None,
            expected=Expected(version.expected_total, version.expected_ids) if version else None,
        )
        coverage = selection.coverage
        answer["records"] = selection.records
        if selection.missing_fields:
            answer["missingFields"] = selection.missing_fields
    else:
        assert source.text is not None
        text, coverage = _text(source.text, offset, limit, budget.bytes)
        answer["text"] = text
        selection = None
    answer["coverage"] = coverage.to_json()
    answer["source"] = _source_json(source)
    answer["byteBudget"] = {"bytes": budget.bytes, "limitedBy": budget.limited_by}
    answer["note"] = note(coverage, budget, limits, unit="records" if selection else "chars")
    return answer


def _body_bytes(answer: dict[str, Any]) -> int:
    body = answer.get("records", answer.get("text", ""))
    return len(encode(body))


def _source_json(source: Source) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if source.ref is not None:
        out["ref"] = source.ref
    if source.kind is not None:
        out["kind"] = source.kind
    if source.records_at:
        out["recordsAt"] = source.records_at
    v = source.version
    if v is not None:
        out.update(tool=v.tool, version=v.number, acquiredAt=v.acquired_at)
    return out


def _text(text: str, offset: int, limit: int | None, max_bytes: int) -> tuple[str, Coverage]:
    if offset < 0 or (limit is not None and limit < 0):
        raise InvalidValue(f"offset and limit must be >= 0, got {offset!r} and {limit!r}")
    total = len(text)
    start = min(offset, total)
    requested = limit if limit is not None else total - start
    end = min(total, start + requested)
    chunk = text[start:end]
    # Quotes and escapes count: the bound is on the encoded string, cut at a character boundary.
    byte_complete = len(encode(chunk)) <= max_bytes
    if not byte_complete:
        lo, hi = 0, len(chunk)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(encode(chunk[:mid])) <= max_bytes:
                lo = mid
            else:
                hi = mid - 1
        chunk = chunk[:lo]
    stop = start + len(chunk)
    reasons = [r for r, on in (("byte_limit", not byte_complete),
                               ("page", stop < total or start > 0)) if on]
    coverage = Coverage(
        requested=requested, loaded=len(chunk), total=total, start=start, stop=stop,
        has_more=stop < total, byte_complete=byte_complete, filtered_count=0,
        input_complete=byte_complete, reasons=tuple(reasons), records_bytes=len(encode(chunk)),
    )
    return chunk, coverage


def note(coverage: Coverage, budget: ReadBudget, limits: ReadLimits, *, unit: str) -> str:
    """One paragraph saying in words what the coverage facts say."""
    c = coverage
    if c.whole:
        return f"Complete: all {c.total:,} {unit} of this result were delivered."
    sentences: list[str] = []
    if c.loaded:
        head = f"Partial read: {unit} {c.start:,}–{c.stop - 1:,} of {c.total:,}"
    else:
        head = f"Partial read: no {unit} of {c.total:,} delivered"
    sentences.append(f"{head} ({c.loaded:,} delivered of {c.requested:,} requested).")
    if "entry_limit" in c.reasons:
        sentences.append(f"Stopped at the explicit-read limit of {limits.explicit_read_entries:,} "
                         f"{unit} per read.")
    if "byte_limit" in c.reasons:
        sentences.append(f"Stopped before position {c.stop:,} to stay within "
                         f"{budget.bytes:,} bytes (set by {budget.limited_by}); nothing was cut "
                         "in half. Select fewer fields or read on.")
    if c.filtered_count:
        sentences.append(f"{c.filtered_count:,} {unit} in the range could not be used "
                         f"({', '.join(sorted({g.reason for g in c.gaps}))}) and are not "
                         "included; see `gaps`.")
    if c.missing_id_count:
        shown = ", ".join(c.missing_ids[:10]) + (" …" if c.missing_id_count > 10 else "")
        sentences.append(f"Missing ids ({c.missing_id_count:,}): {shown}.")
    if c.duplicate_ids:
        sentences.append(f"Identity mismatch: ids delivered more than once: "
                         f"{', '.join(c.duplicate_ids)}; equal counts do not mean the same "
                         "records.")
    if "source_incomplete" in c.reasons:
        sentences.append("The source itself holds fewer records than it declared.")
    if c.has_more:
        sentences.append(f"{c.total - c.stop:,} {unit} from position {c.stop:,} were not read: "
                         f"call read_result again with offset={c.stop}.")
    sentences.append("Do not describe this read as the whole result.")
    return " ".join(sentences)

