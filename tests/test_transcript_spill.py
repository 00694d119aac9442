"""A transcript kept as lines (in memory, in a spill file, or persisted) answers every lookup as
the plain in-memory one does, holds only its index and a bounded cache, and keeps its law:
append-only, a recorded message never changes, a torn or failed write leaves nothing behind."""

from __future__ import annotations

import errno
import gc
import os
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import byref.transcript_lines as lines_module
from _tiers import examples
from byref.refs import Blob, JsonPointer
from byref.transcript import (
    Message,
    Part,
    Role,
    Transcript,
    TranscriptClosedError,
    TranscriptLookupError,
)

KEY = "art_" + "c" * 22
BIG = 10**40

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-BIG, BIG) | st.text(max_size=12)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(alphabet="abcxyz.é0", max_size=4), inner, max_size=4),
    max_leaves=12,
)
parts = st.builds(
    Part,
    type=st.sampled_from(["text", "tool_call", "tool_result"]),
    value=json_values,
    rendered=st.none() | st.text(max_size=8),
    tool=st.none() | st.sampled_from(["t", "search_tools"]),
    call_id=st.none() | st.sampled_from(["c1", "c2"]),
    is_error=st.booleans(),
    derived=st.sampled_from([{}, {"value": JsonPointer(Blob(key=KEY), "/items")},
                             {"": Blob(key=KEY)}]),
)
messages = st.tuples(st.sampled_from(["user", "assistant", "tool"]),
                     st.lists(parts, min_size=1, max_size=3))
MODES = ("memory", "spill", "file")


@contextmanager
def kept(mode: str, directory: Path, *, origin: int = 0, cache: int = 2
         ) -> Iterator[Transcript]:
    if mode == "file":
        t = Transcript(directory / "t.jsonl", origin=origin, cache=cache)
    else:
        t = Transcript(origin=origin, cache=cache, spill=directory if mode == "spill" else False)
    try:
        yield t
    finally:
        t.close()


def outcome(lookup: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", lookup())
    except TranscriptLookupError as exc:
        return ("miss", str(exc))


def answers(t: Transcript, paths: list[str | None]) -> list[tuple[str, Any]]:
    """Every lookup worth asking of `t`, in an order that mixes old and recent messages."""
    top = (t.last_seq if t.last_seq is not None else t.origin) + 2
    out: list[tuple[str, Any]] = [("len", len(t)), ("last", t.last_seq), ("all", list(t))]
    for seq in [*range(top, t.origin - 3, -1), *range(t.origin - 2, top)]:
        out.append(outcome(partial(t.message, seq)))
        for p in (-1, 0, 1, 3):
            out.append(outcome(partial(t.part, seq, p)))
            out.extend(outcome(partial(t.field, seq, p, path)) for path in paths)
    return out


def normal(value: Any) -> Any:
    """What a JSON line gives back for `value` (the record is the encoded line)."""
    return msgspec.json.decode(msgspec.json.encode(value))


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(messages, max_size=8), mode=st.sampled_from(MODES),
       cache=st.integers(0, 3), origin=st.sampled_from([0, 7, 1_234_567_890_123]),
       paths=st.lists(st.none() | st.sampled_from(["a", "0", "a.0", "x.y", "1.é"]), max_size=3))
def test_lines_answer_every_lookup_like_the_plain_in_memory_transcript(
        batch: list[tuple[Role, list[Part]]], mode: str, cache: int, origin: int,
        paths: list[str | None]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain = Transcript(origin=origin, cache=len(batch) + 1)  # every message stays decoded
        with kept(mode, Path(tmp), origin=origin, cache=cache) as t:
            for role, ps in batch:
                a, b = plain.append(role, ps), t.append(role, ps)
                assert a == b
                assert [p.value for p in b.parts] == [normal(p.value) for p in ps]
            assert answers(t, paths) == answers(plain, paths)
            if mode == "file":
                assert t.path is not None
                with Transcript(t.path, origin=origin, cache=cache) as again:
                    assert answers(again, paths) == answers(plain, paths)


@pytest.mark.parametrize("mode", MODES)
def test_a_recorded_message_never_changes(mode: str, tmp_path: Path) -> None:
    value: dict[str, Any] = {"rows": [1, 2], "tuple": (3, 4)}
    with kept(mode, tmp_path, cache=1) as t:
        first = t.append("tool", [Part(type="tool_result", value=value)])
        value["rows"].append(99)  # the caller's object, changed after the append
        t.append("user", [Part(type="text", value="push the first out of the cache")])
        assert first.parts[0].value == {"rows": [1, 2], "tuple": [3, 4]}
        assert t.field(0, 0, None) == first.parts[0].value
        assert t.message(0) == first


def test_a_torn_spill_write_is_cut_back_and_the_next_append_lands_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path, cache=0) as t:
        t.append("user", [Part(type="text", value="before")])
        before = path.read_bytes()
        real = os.pwrite

        def half_then_full(fd: int, data: bytes, offset: int) -> int:
            real(fd, bytes(data[: len(data) // 2]), offset)
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(lines_module.os, "pwrite", half_then_full)
        with pytest.raises(OSError, match="No space"):
            t.append("tool", [Part(type="tool_result", value={"big": "x" * 500})])
        monkeypatch.undo()
        assert path.read_bytes() == before and len(t) == 1
        t.append("user", [Part(type="text", value="after")])
    with Transcript(path) as again:
        assert [m.parts[0].value for m in again] == ["before", "after"]


def test_a_torn_last_line_of_a_long_record_is_dropped_with_a_small_cache(
        tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path, cache=3) as t:
        for i in range(50):
            t.append("user", [Part(type="text", value=f"m{i}")])
    with path.open("ab") as fh:
        fh.write(b'{"seq":50,"role":"user","parts":[{"ty')
    with Transcript(path, cache=3) as t:
        assert len(t) == 50 and t.field(3, 0, None) == "m3" and t.field(49, 0, None) == "m49"
        t.append("user", [Part(type="text", value="m50")])
    with Transcript(path, cache=0) as t:
        assert [m.parts[0].value for m in t] == [f"m{i}" for i in range(51)]


def test_opening_a_missing_persisted_transcript_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "t.jsonl"
    with Transcript(path) as t:
        assert len(t) == 0 and not path.exists()
        t.append("user", [Part(type="text", value="hi")])
    assert path.exists()


def _alive(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_a_spilled_transcript_keeps_its_index_and_cache_not_its_messages(
        tmp_path: Path) -> None:
    result = {"content": [{"type": "text", "text": "ping " * 20}], "isError": False}
    # Other tests' transcripts may still be alive in this process: count what this one adds.
    messages_before, parts_before = _alive(Message), _alive(Part)
    with Transcript(spill=tmp_path, cache=16) as t:
        assert t.storage == "spill"

        def record(n: int) -> None:
            for i in range(n):
                call = t.append("assistant", [Part(type="tool_call", call_id=f"c{i}",
                                                   value={"name": "echo", "input": {"i": i}})])
                t.append("tool", [Part(type="tool_result", call_id=f"c{i}", value=result)])
                t.message(call.seq)

        tracemalloc.start()  # before the warm-up, so the cache's own turnover nets out
        try:
            record(200)
            gc.collect()
            start = tracemalloc.get_traced_memory()[0]
            record(2_000)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - start
        finally:
            tracemalloc.stop()
        # The index: 8 bytes a message (an array grows by ~1/8 at a time); messages ~600 bytes.
        assert grown < 4_000 * 12 + 4_096, grown
        assert _alive(Message) - messages_before <= 16 + 2
        assert _alive(Part) - parts_before <= 16 + 2
        assert len(t) == 4_400 and t.field(1, 0, "isError") is False


def test_closing_releases_the_spill_file(tmp_path: Path) -> None:
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc to count open files")
    before = len(list(fds.iterdir()))
    t = Transcript(spill=tmp_path)
    t.append("user", [Part(type="text", value="hi")])
    assert len(list(fds.iterdir())) == before + 1
    assert list(tmp_path.iterdir()) == []  # nameless: nothing to find or to clean up
    t.close()
    assert len(list(fds.iterdir())) == before
    with pytest.raises(TranscriptClosedError, match="closed"):
        t.message(0)
    with pytest.raises(TranscriptClosedError, match="closed"):
        t.append("user", [Part(type="text", value="again")])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cache": -1}, "cache must be a non-negative integer, got -1"),
    ({"cache": True}, "cache must be a non-negative integer, got True"),
    ({"path": "t.jsonl", "spill": True}, "spill applies only to one kept without a path"),
])
def test_bad_options_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Transcript(**kwargs)
