"""Previews stay bounded and say what they hid; selections stream and go stale loudly."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.jsonview import (
    ChunkReader,
    NotJsonError,
    StaleSelectionError,
    encode,
    preview,
    query_stream,
    query_value,
    shape_hint,
    stream_pointer,
)
from byref.jsonview.select import BACKEND
from byref.refs import Clause

ROWS = [{"id": i, "title": f"item {i}", "status": "open" if i % 3 == 0 else "done",
         "meta": {"owner": "ana" if i % 2 else "bo"}} for i in range(40)]
DOC = {"count": 40, "items": ROWS, "nested": [{"deep": [{"x": 1}, {"x": 2}]}]}


def opener(value: Any, chunk: int = 7) -> Any:
    data = encode(value)
    return lambda: ChunkReader(data[i : i + chunk] for i in range(0, len(data), chunk))


def test_streaming_uses_the_c_backend() -> None:
    assert BACKEND == "yajl2_c"


def test_preview_labels_what_it_hides() -> None:
    big = {"items": [{"id": i, "body": "x" * 500} for i in range(1000)], "title": "t"}
    text = preview(big, 2_000)
    assert len(text) <= 2_000
    assert "more items" in text
    assert "[string, 500 chars]" in text


def test_shape_hint_is_one_line() -> None:
    assert shape_hint(ROWS) == "JSON array, 40 items; keys: id, title, status, meta"
    assert shape_hint(DOC).startswith("JSON object, 3 keys: count, items, nested; 'items': array, "
                                      "40 items (keys: id, title, status, meta)")
    assert "\n" not in shape_hint(DOC)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=400),
    lambda c: st.lists(c, max_size=30) | st.dictionaries(st.text(max_size=10), c, max_size=30),
    max_leaves=200,
)


@given(json_values, st.integers(min_value=60, max_value=6_000))
@settings(max_examples=examples(150), deadline=None)
def test_preview_never_exceeds_its_budget(value: Any, budget: int) -> None:
    assert len(preview(value, budget)) <= budget


def test_query_in_memory_and_streamed_agree() -> None:
    clauses = (Clause.equals("status", "open"), Clause.equals("meta.owner", "bo"))
    expected = [r for r in ROWS if r["status"] == "open" and r["meta"]["owner"] == "bo"]
    assert query_value(DOC, "/items", clauses) == expected
    assert list(query_stream(opener(DOC), "/items", clauses)) == expected
    contains = (Clause.containing("title", "item 1"),)
    assert [r["id"] for r in query_stream(opener(DOC), "/items", contains)] == [1, *range(10, 20)]


def test_eq_is_json_equality() -> None:
    rows = [{"v": True}, {"v": 1}, {"v": 1.0}, {"v": "1"}]
    assert query_value(rows, "", (Clause.equals("v", 1),)) == [{"v": 1}, {"v": 1.0}]
    assert query_value(rows, "", (Clause.equals("v", True),)) == [{"v": True}]


row_values = st.fixed_dictionaries({
    "s": st.sampled_from(["open", "done", "x"]),
    "n": st.integers(-5, 5),
    "t": st.text(max_size=6),
})


@given(st.lists(row_values, max_size=40), st.sampled_from(["open", "done"]), st.integers(-5, 5),
       st.integers(1, 50))
@settings(max_examples=examples(100), deadline=None)
def test_streamed_filter_equals_in_memory(rows: list[dict[str, Any]], s: str, n: int,
                                         chunk: int) -> None:
    doc = {"data": {"rows": rows}}
    clauses = (Clause.equals("s", s), Clause.equals("n", n))
    assert list(query_stream(opener(doc, chunk), "/data/rows", clauses)) == query_value(
        doc, "/data/rows", clauses)


def test_pointer_streams_to_one_node() -> None:
    assert stream_pointer(opener(DOC), "/items/3/title") == "item 3"
    assert stream_pointer(opener(DOC), "/nested/0/deep/1") == {"x": 2}
    assert stream_pointer(opener(DOC), "/count") == 40
    assert list(query_stream(opener(DOC), "/nested/0/deep", (Clause.equals("x", 2),))) == [
        {"x": 2}]


@pytest.mark.parametrize("path", ["/itemz", "/items/99", "/count/x"])
def test_stale_paths_raise_never_empty(path: str) -> None:
    with pytest.raises(StaleSelectionError, match=f"Derived JSON path {path!r} no longer exists"):
        stream_pointer(opener(DOC), path)


def test_stale_query_paths_raise() -> None:
    with pytest.raises(StaleSelectionError, match="Derived JSON path '/itemz' no longer exists"):
        list(query_stream(opener(DOC), "/itemz", ()))
    with pytest.raises(StaleSelectionError, match="is a number, not an array"):
        list(query_stream(opener(DOC), "/count", ()))
    with pytest.raises(StaleSelectionError, match="is an object, not an array"):
        list(query_stream(opener({"items": {}}), "/items", ()))
    assert list(query_stream(opener({"items": []}), "/items", ())) == []  # empty is not stale


def test_non_json_bytes() -> None:
    with pytest.raises(NotJsonError, match="is not valid JSON"):
        list(query_stream(lambda: io.BytesIO(b"%PDF-1.7 not json"), "/items", ()))
