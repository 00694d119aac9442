"""Tool calls and the refs between them: what each took, what each returned, where each went.

The law: provenance is read from the record, never guessed. A call took a ref when its part
records one in `derived` (the refs the model wrote, parsed); a result returned one when its
`derived` entry stands for data. A ref taken is traced to the result that returned it: a Blob
key to the result whose entry holds that key (else to the trace's `minted` event, else "not
returned by this run"), a Message ref to the result at its seq and part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from byref.jsonview import dumps
from byref.lens.reading.run import Run, transcript_of
from byref.refs import Blob, MessageRef, Ref
from byref.transcript import Part


@dataclass
class RefUse:
    """A reference in a call or result: where it sits and what it names."""
    path: str
    """The dot-path it sits at in the call's part or the result's."""
    ref: Ref
    origin: str | None = None
    """For a ref taken: which result (seq/part) it came from."""
    origin_call: str | None = None
    went_to: list[str] = field(default_factory=list)
    """For a ref returned: the calls that took it (call ids)."""

    @property
    def key(self) -> str | None:
        """The artifact key at the bottom of this ref, if any (for a link to its page)."""
        ref: Ref | None = self.ref
        while ref is not None:
            if isinstance(ref, Blob) and ref.key is not None:
                return ref.key
            ref = getattr(ref, "source", None)
        return None

    @property
    def text(self) -> str:
        """The reference as JSON text."""
        return dumps(self.ref.to_json())


@dataclass
class Result:
    """A tool result as recorded: its place, rendered text, value and refs."""
    seq: int
    part: int
    rendered: str
    is_error: bool
    value: Any
    returns: list[RefUse]

    @property
    def coverage(self) -> dict[str, Any] | None:
        """The read coverage the result reports, or None."""
        value = self.value
        if isinstance(value, dict) and isinstance(value.get("coverage"), dict):
            cov: dict[str, Any] = value["coverage"]
            return cov
        return None


@dataclass
class Call:
    """A tool call in a run with its result and the refs it used."""
    call_id: str
    tool: str
    seq: int
    part: int
    written: str
    """The call's input exactly as the model wrote it."""
    takes: list[RefUse]
    result: Result | None = None
    record: str | None = None
    """For a code run: its record of inner calls (an artifact key), as its summary names it."""
    inner: list[Call] = field(default_factory=list)
    """For a code run: the calls its program made, read from the record (ids `<run>.<n>`)."""
    gap: str | None = None
    """For a code run whose record cannot be read: why (said on the page)."""


_RECORD = re.compile(r"^\[[a-z_]+\] \d+ tool calls?\b.*; record (art_[A-Za-z0-9_-]+)\.$", re.M)
"""A code run's summary line naming its record (`byref.tools.code_mode.run_code`)."""
CODE_RUN_KIND = "record/code-run"


def calls(run: Run) -> list[Call]:
    """Every tool call in the run's transcript, paired with its result; a code run's inner
    calls under it."""
    found = _paired(run)
    _link(found, run)
    for call in found:
        _inner_calls(run, call)
    return found


def _paired(run: Run) -> list[Call]:
    found: list[Call] = []
    by_id: dict[str, Call] = {}
    for message in run.transcript:
        for index, part in enumerate(message.parts):
            if part.type == "tool_call" and isinstance(part.value, dict):
                call = Call(str(part.value.get("id") or part.call_id), str(part.value.get("name")),
                            message.seq, index, dumps(part.value.get("input")),
                            [RefUse(k, r) for k, r in part.derived.items()])
                found.append(call)
                by_id[call.call_id] = call
            elif part.type == "tool_result":
                owner = by_id.get(part.call_id or "")
                if owner is not None:
                    owner.result = _result(message.seq, index, part)
    return found


def _inner_calls(run: Run, call: Call) -> None:
    """Read a code run's record into `call.inner` (each paired and its refs traced within
    the run), or say in `call.gap` why it cannot be."""
    found = _RECORD.search(call.result.rendered) if call.result is not None else None
    if found is None:
        return
    call.record = found.group(1)
    got = run.get(call.record)
    if got is None:
        call.gap = f"its record {call.record} is not in this run's store"
        return
    meta, data = got
    if meta.kind != CODE_RUN_KIND:
        call.gap = f"{call.record} is a {meta.kind!r}, not a record of inner calls"
        return
    try:
        record = transcript_of(data.splitlines(keepends=True))
    except (ValueError, KeyError, TypeError) as exc:
        call.gap = f"its record {call.record} could not be read ({type(exc).__name__})"
        return
    inner = Run(record, run.events, run.store, run.source, run.ref_scopes)
    call.inner = _paired(inner)
    _link(call.inner, inner)


def _result(seq: int, index: int, part: Part) -> Result:
    derived = dict(part.derived)
    # The opaque marker records the whole part and its `value` as one stand-in; show one.
    if "" in derived and "value" in derived and derived[""] == derived["value"]:
        derived.pop("")
    rendered = part.rendered if part.rendered is not None else dumps(part.value)
    return Result(seq, index, rendered, part.is_error, part.value,
                  [RefUse(k, r) for k, r in derived.items()])


def _link(found: list[Call], run: Run) -> None:
    by_key: dict[str, tuple[Call, RefUse]] = {}
    by_place: dict[tuple[int, int], tuple[Call, list[RefUse]]] = {}
    for call in found:
        result = call.result
        if result is None:
            continue
        by_place[(result.seq, result.part)] = (call, result.returns)
        for use in result.returns:
            if isinstance(use.ref, Blob) and use.ref.key is not None:
                by_key[use.ref.key] = (call, use)
    minted = {e.get("ref"): e for e in run.events if e.get("event") == "minted"}
    for call in found:
        for use in call.takes:
            ref = use.ref
            if isinstance(ref, Blob) and ref.key is not None and ref.key in by_key:
                producer, returned = by_key[ref.key]
                assert producer.result is not None
                use.origin = (f"result of {producer.tool} ({producer.call_id}), "
                              f"seq {producer.result.seq} part {producer.result.part}")
                use.origin_call = producer.call_id
                returned.went_to.append(call.call_id)
            elif isinstance(ref, MessageRef) and ref.seq is not None and (
                    (ref.seq, ref.part) in by_place):
                producer, returns = by_place[(ref.seq, ref.part)]
                use.origin = (f"result of {producer.tool} ({producer.call_id}), seq {ref.seq} "
                              f"part {ref.part}" + (f" field {ref.field!r}" if ref.field else ""))
                use.origin_call = producer.call_id
                for returned in returns:
                    if _under(ref.field or "", returned.path):
                        returned.went_to.append(call.call_id)
            elif isinstance(ref, Blob) and ref.key in minted:
                use.origin = f"minted as {minted[ref.key].get('kind')!r} (not a recorded result)"
            else:
                use.origin = "not returned by any result in this run"


def _under(path: str, stand_in: str) -> bool:
    return not stand_in or path == stand_in or path.startswith(stand_in + ".") or (
        stand_in.startswith(path + ".") if path else True)
