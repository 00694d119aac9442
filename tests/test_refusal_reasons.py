"""Refusal reasons are one closed set (`byref.errors.RefusalReason`): the set is pinned here, and
every reason the source passes to a refusal or writes on a `refused` event is a member of it and
written out in full (an f-string reason would escape the type checker)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import byref
from _source import parse
from byref.dispatch.calls import Refusal
from byref.errors import RefusalReason, Refused
from byref.tools.tool import ToolRefusal

SRC = Path(byref.__file__).parent

PINNED = {
    "refused", "unknown-tool", "invalid-input", "invalid-arguments", "internal-error",
    "bad-ref", "missing-or-expired", "kind-mismatch", "integrity",
    "tool-refused", "tool-error", "upstream-error", "upstream-failed", "not-permitted",
    "truncated", "over-ceiling", "unserializable-result", "damaged-record",
    "gone", "not-readable", "parse-error",
    "isolation-unavailable", "code-error", "limit-cpu", "limit-memory", "limit-wall", "limit-disk",
    "limit-file-size", "limit-processes", "limit-output-files", "limit-output-bytes",
    "limit-calls", "call-timeout", "channel-protocol", "limit-runs",
}

# Callables taking a reason, and the position of that argument.
REASON_ARG = {"Refusal": 1, "ToolRefusal": 1, "WantsRefusal": 1, "_refuse": 2}


def _reasons() -> list[tuple[str, ast.expr]]:
    """(where, expression) for every reason written in byref's source."""
    out: list[tuple[str, ast.expr]] = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(parse(path)):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            where = f"{path.relative_to(SRC)}:{node.lineno}"
            at = REASON_ARG.get(name or "")
            if at is not None and len(node.args) > at:
                out.append((where, node.args[at]))
            refused_event = (bool(node.args) and isinstance(node.args[0], ast.Constant)
                             and node.args[0].value == "refused")
            if at is not None or refused_event:
                out.extend((where, kw.value) for kw in node.keywords if kw.arg == "reason")
    return out


def test_the_set_of_refusal_reasons_is_pinned() -> None:
    assert set(get_args(RefusalReason)) == PINNED
    assert len(get_args(RefusalReason)) == len(PINNED)  # no member written twice


def test_the_defaults_are_members() -> None:
    assert Refused.reason == "refused"
    assert ToolRefusal("no").reason == "tool-refused"
    assert Refusal("no", "bad-ref").reason == "bad-ref"


def test_every_reason_in_the_source_is_a_member_written_in_full() -> None:
    found = _reasons()
    literals = {ast.literal_eval(e) for _, e in found if isinstance(e, ast.Constant)}
    assert len(literals) >= 15  # the scan reaches the call sites
    outside = sorted(f"{where}: {ast.unparse(e)}" for where, e in found
                     if isinstance(e, ast.Constant) and e.value not in PINNED)
    assert outside == []
    formatted = sorted(f"{where}: {ast.unparse(e)}" for where, e in found
                       if isinstance(e, ast.JoinedStr))
    assert formatted == []


def test_a_tools_own_code_rides_beside_the_closed_reason() -> None:
    from byref.dispatch import Call, Dispatcher
    from byref.events import Emitter, MemorySink
    from byref.store import MemoryStore, Scope
    from byref.transcript import Transcript

    @byref.tool
    def spend() -> str:
        """Declines: over quota."""
        raise ToolRefusal("Over today's quota; try tomorrow.", code="quota-exceeded")

    sink = MemorySink()
    transcript = Transcript()
    dispatcher = Dispatcher([spend], transcript=transcript, store=MemoryStore(),
                            scope=Scope("t"), emit=Emitter(sink))
    part = dispatcher.dispatch(Call("c1", "spend", {}), call_seq=0, seq=1, part=0)
    assert part.is_error and part.value == "Over today's quota; try tomorrow."
    assert part.reason == "tool-refused"  # the part carries it to code mode, unrecorded
    assert "reason" not in part.to_json()
    refused = [e for e in sink.events if e.name == "refused"]
    assert [(e.data["reason"], e.data["code"]) for e in refused] == [
        ("tool-refused", "quota-exceeded")]


def test_a_code_that_is_not_a_short_slug_is_a_developer_error() -> None:
    import pytest

    from byref.errors import InvalidValue

    with pytest.raises(InvalidValue, match=r"ToolRefusal code 'Quota Exceeded!' is not a short "
                       r"slug; use lower-case letters, digits, '\.', '_' or '-' \(at most 64\)"):
        ToolRefusal("no", code="Quota Exceeded!")
