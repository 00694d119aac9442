"""The projection keeps its last answer only while it must be the same: with a real `Catalog`
and a frozenset `always` (the gateway's case) every answer still equals the law walked from
scratch, at every step, also when the catalog grows between two questions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.discovery import Catalog
from byref.discovery.declaring.workingset import (
    ACTIVATE,
    SEARCH,
    Projection,
    replayed_working_set,
    working_set,
)
from byref.tools import Tool
from byref.transcript import Part, Transcript

NAMES = ("a", "b", "c", "d", "e", "late", "ghost")
ALWAYS = frozenset({"e"})


def _tool(name: str) -> Tool:
    return Tool(name=name, description=f"Tool {name}.", fn=lambda: None,
                input_schema={"type": "object", "properties": {}})


def _catalog() -> Catalog:
    return Catalog([_tool(n) for n in ("a", "b", "c", "d", "e")])


def call(name: str, call_id: str | None, args: Any) -> Part:
    return Part(type="tool_call", value={"name": name, "id": call_id, "input": args}, tool=name,
                call_id=call_id)


def result(call_id: str | None, *, error: bool) -> Part:
    return Part(type="tool_result", value="x", rendered="x", call_id=call_id, is_error=error)


_ids = st.sampled_from(["c0", "c1", "c2", None])
_part = st.one_of(
    st.builds(lambda names, cid: call(ACTIVATE, cid, {"names": names}),
              st.lists(st.sampled_from(NAMES), max_size=3), _ids),
    st.builds(lambda name, cid: call(name, cid, {}), st.sampled_from(NAMES), _ids),
    st.builds(lambda cid: call(SEARCH, cid, {}), _ids),
    st.builds(lambda cid, err: result(cid, error=err), _ids, st.booleans()),
    st.just(Part(type="text", value="hi")),
)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.tuples(st.lists(_part, min_size=1, max_size=3), st.integers(0, 2),
                          st.booleans(), st.booleans(), st.booleans()), max_size=30))
def test_kept_answers_equal_the_replayed_law(
        messages: list[tuple[list[Part], int, bool, bool, bool]]) -> None:
    transcript = Transcript(origin=7)
    catalog = _catalog()
    for parts, budget, fixed, grow, ask in messages:
        transcript.append("assistant", parts)
        if grow and "late" not in catalog:
            catalog.add(_tool("late"))  # a new version: the kept answer may not stand
        if not ask:
            continue
        always = ALWAYS if fixed else frozenset()
        expected = replayed_working_set(transcript, catalog, budget=budget, always=always)
        for _ in range(2):  # the second time with nothing new: the kept answer
            assert working_set(transcript, catalog, budget=budget, always=always) == expected


def test_touching_the_newest_name_again_keeps_the_answer() -> None:
    t = Transcript()
    catalog = _catalog()
    projection = Projection.of(t)
    for n in range(3):
        t.append("assistant", [call("a", f"c{n}", {})])
        t.append("tool", [result(f"c{n}", error=False)])
        assert working_set(t, catalog, always=ALWAYS) == ["a"]
    kept = projection._picked
    t.append("assistant", [call("a", "c9", {})])
    assert working_set(t, catalog, always=ALWAYS) == ["a"]
    assert projection._picked is kept  # nothing could reorder the set: not picked again
    t.append("assistant", [call("b", "c10", {})])
    assert working_set(t, catalog, always=ALWAYS) == ["b", "a"]
    assert projection._picked is not kept


def test_a_refused_activation_of_the_newest_name_moves_the_answer() -> None:
    t = Transcript()
    catalog = _catalog()
    t.append("assistant", [call("a", "x", {})])
    t.append("assistant", [call(ACTIVATE, "y", {"names": ["b"]})])
    assert working_set(t, catalog, always=ALWAYS) == ["b", "a"]  # waiting, it counts
    t.append("tool", [result("y", error=True)])
    assert working_set(t, catalog, always=ALWAYS) == ["a"] == replayed_working_set(t, catalog)


def test_other_containers_are_asked_every_time() -> None:
    t = Transcript()
    names = {"a"}
    t.append("assistant", [call("b", "x", {})])
    assert working_set(t, names) == []
    names.add("b")  # a set may change in place: no kept answer for it
    assert working_set(t, names) == ["b"]
