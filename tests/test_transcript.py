"""The transcript: append-only, addressable, persisted, and honest about what exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from byref.refs import Blob, JsonPointer
from byref.transcript import Part, Transcript, TranscriptCorruptError, TranscriptLookupError

KEY = "art_" + "b" * 22


def _fill(t: Transcript) -> None:
    t.append("user", [Part(type="text", value="hello")])
    t.append("tool", [
        Part(type="tool_result", value={"result": {"items": [1, 2, 3]},
                                        "n": 12345678901234567890123},
             rendered="{...}", tool="t", call_id="c1"),
        Part(type="tool_result", value={"value": {"derived": True}}, tool="q", call_id="c2",
             derived={"value": JsonPointer(Blob(key=KEY), "/items")}),
    ])


@pytest.fixture(params=["memory", "spill", "file"])
def kept(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Transcript]:
    """A transcript in each storage, with a one-message cache so lookups read its lines."""
    if request.param == "file":
        made = Transcript(tmp_path / "t.jsonl", cache=1)
    else:
        made = Transcript(spill=tmp_path if request.param == "spill" else False, cache=1)
    with made:
        yield made


def test_addressing_by_seq_part_field(kept: Transcript) -> None:
    t = kept
    _fill(t)
    assert t.field(1, 0, "result.items.1") == 2
    assert t.field(1, 0, None) == {"result": {"items": [1, 2, 3]},
                                   "n": 12345678901234567890123}
    assert t.part(1, 1).derived["value"] == JsonPointer(Blob(key=KEY), "/items")


@pytest.mark.parametrize(
    ("seq", "part", "field", "message"),
    [
        (42, 0, None, "message 42 does not exist; messages are 0–1."),
        (1, 5, None, "message 1 has parts 0–1; there is no part 5."),
        (0, 1, None, "message 0 has part 0; there is no part 1."),
        (1, 0, "result.itemz", "message 1 part 0 has no field 'itemz' at 'result'; fields there: "
                               "'items'."),
        (1, 0, "result.items.7", "index 7 is out of range at 'result.items' (the array has 3 "
                                 "items)."),
        (0, 0, "x", "cannot take field 'x' of a str."),
    ],
)
def test_misses_say_what_exists(kept: Transcript, seq: int, part: int, field: str | None,
                                message: str) -> None:
    t = kept
    _fill(t)
    with pytest.raises(TranscriptLookupError) as err:
        t.field(seq, part, field)
    assert message in str(err.value)


def test_persistence_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path) as t:
        _fill(t)
        with Transcript(path) as again:
            assert len(again) == 2
            assert list(again) == list(t)
            assert again.field(1, 0, "n") == 12345678901234567890123  # big ints stay exact


def test_torn_last_line_is_discarded_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path) as first:
        _fill(first)
    with path.open("ab") as fh:
        fh.write(b'{"seq":2,"role":"user","par')
    with Transcript(path) as t:
        assert len(t) == 2
        t.append("user", [Part(type="text", value="after the crash")])
    with Transcript(path) as again:
        assert [m.seq for m in again] == [0, 1, 2]


def test_unencodable_value_leaves_transcript_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path) as t:
        _fill(t)
        before = path.read_bytes()
        with pytest.raises(TypeError):
            t.append("tool", [Part(type="tool_result", value={"x": object()})])
        assert len(t) == 2 and path.read_bytes() == before


def test_a_damaged_middle_line_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path) as first:
        _fill(first)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b'{"seq": 1, "role": "tool"\n' + b"".join(lines[1:]))
    with pytest.raises(TranscriptCorruptError, match=re.escape(
            f"Transcript {str(path)!r} line 2 is not a recorded message")):
        Transcript(path)
    path.write_bytes(lines[1])
    with pytest.raises(TranscriptCorruptError, match=re.escape(
            "line 1 holds message 1, expected 0; lines were removed or reordered.")):
        Transcript(path)
