"""Property tests for the coverage arithmetic: the facts always add up to what happened."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.jsonview import encode
from byref.reads import Item, Source, read, select

ids = st.sampled_from(["A", "B", "C", "D", "E", "F", "G", "H"])
records = st.fixed_dictionaries({"id": ids, "memo": st.text(max_size=30)})
items = st.lists(
    st.one_of(records.map(Item), st.just(Item(error="line: not JSON")),
              st.integers().map(Item)),
    max_size=40,
)
maybe_small = st.one_of(st.none(), st.integers(min_value=0, max_value=45))


@settings(max_examples=examples(400), deadline=None)
@given(items, st.integers(min_value=0, max_value=45), maybe_small,
       st.one_of(st.none(), st.integers(min_value=0, max_value=20)),
       st.one_of(st.none(), st.integers(min_value=2, max_value=1_500)),
       st.booleans())
def test_coverage_adds_up(source: list[Item], offset: int, limit: int | None,
                          max_entries: int | None, max_bytes: int | None,
                          select_fields: bool) -> None:
    fields = ["id"] if select_fields else None
    sel = select(source, offset=offset, limit=limit, fields=fields, max_entries=max_entries,
                 max_bytes=max_bytes, id_field="id")
    c = sel.coverage
    total = len(source)
    start = min(offset, total)
    window_end = min(total, start + (limit if limit is not None else total - start))
    assert (c.total, c.start) == (total, start)
    assert c.requested == (limit if limit is not None else total - start)
    assert start <= c.stop <= window_end
    # Every examined position was delivered or counted as filtered, with its gap.
    assert c.loaded + c.filtered_count == c.stop - c.start == len(sel.records) + c.filtered_count
    gap_positions = {p for g in c.gaps for p in range(g.start, g.end)}
    assert len(gap_positions) == c.filtered_count
    delivered_positions = [p for p in range(c.start, c.stop) if p not in gap_positions]
    # Delivered records are whole: each equals its source record (projected), in order.
    expected: list[Any] = []
    for p in delivered_positions:
        value = source[p].value
        expected.append({"id": value["id"]} if fields else value)
    assert sel.records == expected
    assert c.has_more == (c.stop < total)
    if max_entries is not None:
        assert c.loaded <= max_entries
    if max_bytes is not None:
        assert len(encode(sel.records)) <= max_bytes
    if not c.byte_complete:
        assert max_bytes is not None and "byte_limit" in c.reasons
        nxt = source[c.stop].value
        grown = [*sel.records, {"id": nxt["id"]} if fields else nxt]
        assert len(encode(grown)) > max_bytes  # it stopped only because the next would not fit
    # The ids a limit left out are named, in source order.
    unread = [it.value["id"] for it in source[c.stop:window_end]
              if it.error is None and isinstance(it.value, dict)]
    assert list(c.missing_ids) == unread[:50] and c.missing_id_count == len(unread)
    delivered_ids = [r["id"] for r in sel.records if isinstance(r, dict)]
    dupes = sorted({i for i in delivered_ids if delivered_ids.count(i) > 1})
    assert list(c.duplicate_ids) == dupes
    complete = c.stop == window_end and c.filtered_count == 0 and not dupes
    assert c.input_complete == complete
    if not c.input_complete:
        assert c.reason is not None and c.reason != "page"
    if c.whole:
        assert c.loaded == total and c.reason is None


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=200), st.integers(min_value=0, max_value=220), maybe_small,
       st.integers(min_value=2, max_value=300))
def test_text_reads_cut_at_a_character_and_say_so(text: str, offset: int, limit: int | None,
                                                  max_bytes: int) -> None:
    answer = read(Source(text=text), offset=offset, limit=limit, max_bytes=max_bytes)
    c = answer["coverage"]
    start, stop = c["range"]
    assert answer["text"] == text[start:stop]
    assert len(encode(answer["text"])) <= max_bytes
    assert c["loaded"] == stop - start and c["hasMore"] == (stop < len(text))
    end = min(len(text), start + (limit if limit is not None else len(text) - start))
    assert c["byteComplete"] == (stop == end) == c["inputComplete"]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(records, max_size=30), st.integers(min_value=300, max_value=3_000))
def test_the_whole_answer_fits_the_request_room(rows: list[dict[str, Any]], room: int) -> None:
    answer = read(Source(items=[Item(r) for r in rows]), room=room)
    assert len(encode(answer)) <= room or answer["records"] == []
    assert answer["byteBudget"]["limitedBy"] == "request_room"
