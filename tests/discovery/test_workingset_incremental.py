"""The incremental working set equals the law walked from scratch, at every step of any
transcript: activations (some refused, some answered late or never), direct calls, searches,
other parts, reused call ids and results before their calls."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.discovery.declaring.workingset import (
    ACTIVATE,
    SEARCH,
    Projection,
    replayed_working_set,
    working_set,
)
from byref.refs import Blob
from byref.transcript import Part, Transcript

NAMES = ("a", "b", "c", "d", "e", "f", "ghost", "read_json")
CATALOG = frozenset({"a", "b", "c", "d", "e", "f", "read_json", "query_json"})
ALWAYS = frozenset({"read_json"})


def call(name: str, call_id: str | None, args: Any) -> Part:
    return Part(type="tool_call", value={"name": name, "id": call_id, "input": args}, tool=name,
                call_id=call_id)


def result(call_id: str | None, *, error: bool, stored: bool = False) -> Part:
    derived = {"value": Blob(key="art_" + "s" * 22)} if stored else {}
    return Part(type="tool_result", value="x", rendered="x", call_id=call_id, is_error=error,
                derived=derived)


def check(transcript: Transcript, budget: int) -> None:
    for always in ((), ALWAYS):
        expected = replayed_working_set(transcript, CATALOG, budget=budget, always=always)
        assert working_set(transcript, CATALOG, budget=budget, always=always) == expected


# -- realistic sessions: unique ids, every result after its call, some late or missing --------
_op = st.one_of(
    st.tuples(st.just("activate"), st.lists(st.sampled_from(NAMES), max_size=4),
              st.sampled_from(["ok", "refused", "late", "never"])),
    st.tuples(st.just("direct"), st.sampled_from(NAMES), st.sampled_from(["ok", "refused"])),
    st.tuples(st.just("search"), st.just(""), st.just("ok")),
    st.tuples(st.just("text"), st.just(""), st.just("ok")),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_op, st.booleans(), st.integers(0, 4)), max_size=40))
def test_realistic_sessions_match_the_replayed_law_at_every_step(
        ops: list[tuple[tuple[str, Any, str], bool, int]]) -> None:
    transcript = Transcript()
    late: list[Part] = []
    for n, ((kind, arg, outcome), ask, budget) in enumerate(ops):
        cid = f"call_{n}"
        if kind == "activate":
            transcript.append("assistant", [call(ACTIVATE, cid, {"names": arg})])
        elif kind == "direct":
            transcript.append("assistant", [call(arg, cid, {})])
        elif kind == "search":
            transcript.append("assistant", [call(SEARCH, cid, {"query": "q"})])
        else:
            transcript.append("user", [Part(type="text", value="hi")])
        if kind in ("activate", "direct", "search"):
            if outcome == "late":
                late.append(result(cid, error=n % 2 == 0))  # lands after later calls
            elif outcome != "never":
                transcript.append("tool", [result(cid, error=outcome == "refused")])
        if late and n % 3 == 0:
            transcript.append("tool", [late.pop(0)])
        if ask:
            check(transcript, budget)
    for part in late:
        transcript.append("tool", [part])
    check(transcript, 3)


# -- anything: a handful of ids shared by every call and result, several parts a message ------
_ids = st.sampled_from(["c0", "c1", "c2", None])
_part = st.one_of(
    st.builds(lambda names, cid: call(ACTIVATE, cid, {"names": names}),
              st.one_of(st.lists(st.sampled_from(NAMES), max_size=3), st.sampled_from(NAMES),
                        st.none()), _ids),
    st.builds(lambda name, cid: call(name, cid, {}), st.sampled_from(NAMES), _ids),
    st.builds(lambda cid: call(SEARCH, cid, {}), _ids),
    st.builds(lambda cid, err, stored: result(cid, error=err, stored=stored), _ids,
              st.booleans(), st.booleans()),
    st.just(Part(type="text", value="hi")),
    st.just(Part(type="tool_call", value="not a dict", tool=None, call_id="c0")),
)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.tuples(st.lists(_part, min_size=1, max_size=3), st.booleans(),
                          st.integers(0, 5)), max_size=30))
def test_any_transcript_matches_the_replayed_law_at_every_step(
        messages: list[tuple[list[Part], bool, int]]) -> None:
    transcript = Transcript(origin=1_000)
    for parts, ask, budget in messages:
        transcript.append("assistant", parts)
        if ask:
            check(transcript, budget)
    check(transcript, 2)


def test_an_error_result_for_a_settled_activation_takes_it_back() -> None:
    t = Transcript()
    t.append("assistant", [call(ACTIVATE, "x", {"names": ["a"]})])
    t.append("tool", [result("x", error=False)])
    t.append("assistant", [call("b", "y", {})])
    assert working_set(t, CATALOG) == ["b", "a"]
    t.append("tool", [result("x", error=True)])  # a reused id: the law refuses the activation
    assert working_set(t, CATALOG) == replayed_working_set(t, CATALOG) == ["b"]


def test_a_refusal_after_other_calls_removes_only_that_activation() -> None:
    t = Transcript()
    t.append("assistant", [call(ACTIVATE, "x", {"names": ["a", "b"]})])
    t.append("assistant", [call("c", "y", {})])
    assert working_set(t, CATALOG) == ["c", "b", "a"]  # waiting for its result, it counts
    t.append("tool", [result("y", error=False)])
    t.append("tool", [result("x", error=True)])
    assert working_set(t, CATALOG) == ["c"]


def test_the_log_stays_the_size_of_the_names_not_the_session() -> None:
    t = Transcript()
    for n in range(2_000):
        cid = f"c{n}"
        name = NAMES[n % 3]
        t.append("assistant", [call(ACTIVATE if n % 2 else name, cid,
                                    {"names": [name]} if n % 2 else {})])
        t.append("tool", [result(cid, error=n % 5 == 0)])
        working_set(t, CATALOG)
    projection = Projection.of(t)
    assert len(projection._log) <= 3
    assert working_set(t, CATALOG) == replayed_working_set(t, CATALOG)


def test_one_projection_per_transcript_released_with_it() -> None:
    t = Transcript()
    assert Projection.of(t) is Projection.of(t)
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None


def test_negative_budget_is_refused_by_both() -> None:
    for fn in (working_set, replayed_working_set):
        with pytest.raises(ValueError, match="budget must be ≥ 0"):
            fn(Transcript(), CATALOG, budget=-1)


def test_a_stored_result_declares_the_json_readers_and_settles_its_call() -> None:
    t = Transcript()
    t.append("assistant", [call("a", "c1", {})])
    t.append("tool", [result("c1", error=False, stored=True)])
    assert working_set(t, CATALOG, budget=3) == ["read_json", "query_json", "a"]
    t.append("assistant", [call(ACTIVATE, "c2", {"names": ["b"]})])
    t.append("tool", [result("c2", error=True, stored=True)])  # an error is never a stand-in
    assert working_set(t, CATALOG, budget=3) == replayed_working_set(t, CATALOG, budget=3)
    assert "b" not in working_set(t, CATALOG, budget=3)
