"""Code mode's channel parser: whatever bytes the child writes, the host gets requests in order
or a ChannelError, never another exception and never a frame over the limit read."""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.tools.code_mode.channel import (
    MAX_DEPTH,
    MAX_FRAME,
    MAX_VALUES,
    Answer,
    Call,
    ChannelError,
    Done,
    FrameReader,
    Read,
    frame,
    parse,
    write_all,
)


def _reader(data: bytes, max_frame: int = MAX_FRAME) -> FrameReader:
    read, write = os.pipe()
    # Small enough for the pipe's buffer in these tests; the writer closes: EOF after the data.
    os.write(write, data)
    os.close(write)
    return FrameReader(read, max_frame=max_frame)


def _drain(reader: FrameReader) -> list[object]:
    out: list[object] = []
    try:
        while (request := reader.next()) is not None:
            out.append(request)
    finally:
        os.close(reader.fd)
    return out


def test_well_formed_requests_arrive_in_order() -> None:
    data = frame(Call(1, "lookup", {"sku": "A"})) + frame(Read(2, "h1", 0, 10)) + frame(
        Done(5, [1, 2]))
    assert _drain(_reader(data)) == [Call(1, "lookup", {"sku": "A"}), Read(2, "h1", 0, 10),
                                     Done(5, [1, 2])]


def test_an_oversized_length_is_refused_before_its_body_is_read() -> None:
    with pytest.raises(ChannelError, match="over the channel's limit"):
        _drain(_reader(struct.pack(">I", 0xFFFFFFFF) + b"x" * 10))


def test_an_id_out_of_order_is_refused() -> None:
    with pytest.raises(ChannelError, match="ids must increase"):
        _drain(_reader(frame(Call(2, "a", {})) + frame(Call(2, "b", {}))))


def test_a_host_message_sent_by_the_child_is_not_a_request() -> None:
    with pytest.raises(ChannelError, match="not a request"):
        _drain(_reader(frame(Answer(1, value="forged"))))


def test_a_torn_frame_is_refused() -> None:
    with pytest.raises(ChannelError, match="closed inside a frame"):
        _drain(_reader(frame(Call(1, "a", {}))[:-3]))


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=2_000))
def test_any_bytes_give_requests_or_a_channel_error(data: bytes) -> None:
    try:
        requests = _drain(_reader(data, max_frame=1_000))
    except ChannelError:
        return
    ids = [r.id for r in requests]  # type: ignore[attr-defined]
    assert ids == sorted(set(ids))


_values = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(),
                       lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=20)


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(st.text(max_size=10), _values, max_size=5), st.text(max_size=30),
       st.integers(1, 2**31))
def test_a_call_round_trips_exactly(args: dict[str, object], name: str, ident: int) -> None:
    body = frame(Call(ident, name, args))[4:]
    assert parse(body) == Call(ident, name, args)


@given(st.dictionaries(st.sampled_from(["op", "id", "tool", "args", "x"]), _values, max_size=5))
def test_any_map_is_a_request_or_a_channel_error(fields: dict[str, object]) -> None:
    with contextlib.suppress(ChannelError):
        parse(msgspec.msgpack.encode(fields))


# -- what a hostile child can send: depth, size, keys, floods ---------------------------------
def _nested(depth: int, leaf: bytes = b"\xc0", kind: str = "list") -> bytes:
    """msgpack of `depth` containers inside each other (built as bytes: no encoder recursion)."""
    opener = b"\x91" if kind == "list" else b"\x81\xa1k"
    return opener * depth + leaf


def _done(value: bytes, ident: int = 1) -> bytes:
    return b"\x83\xa2op\xa4done\xa2id" + bytes([ident]) + b"\xa5value" + value


def _call(args_value: bytes, ident: int = 1) -> bytes:
    return b"\x84\xa2op\xa4call\xa2id" + bytes([ident]) + b"\xa4tool\xa1t\xa4args\x81\xa1a" \
        + args_value


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 5_000), st.sampled_from(["list", "map"]), st.sampled_from([_done, _call]))
def test_any_nesting_is_a_request_within_the_depth_or_a_refusal_in_words(
        depth: int, kind: str, wrap: Any) -> None:
    body = wrap(_nested(depth, kind=kind))
    try:
        request = parse(body)
    except ChannelError as exc:
        assert "nest deeper than 64 levels" in str(exc) or "not a request" in str(exc)
        assert depth + (1 if wrap is _call else 0) >= MAX_DEPTH
        return
    assert depth + (1 if wrap is _call else 0) <= MAX_DEPTH
    assert isinstance(request, Done | Call)


def test_the_issues_nested_return_value_is_refused_in_words() -> None:
    for depth in (600, 750, 900):
        with pytest.raises(ChannelError, match=r"^the return value nest deeper than 64 levels; "
                                               r"flatten them$"):
            parse(_done(_nested(depth)))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3 * MAX_VALUES), st.sampled_from([b"\x90", b"\x80", b"\x01", b"\xa0"]))
def test_a_value_over_the_value_count_is_refused_before_it_is_walked(
        n: int, item: bytes) -> None:
    body = _done(b"\xdd" + struct.pack(">I", n) + item * n)
    try:
        request = parse(body)
    except ChannelError as exc:
        assert str(exc) == ("the return value hold more than 131,072 values; pass large data "
                            "as a handle or a file instead")
        assert n + 1 > MAX_VALUES
        return
    assert isinstance(request, Done) and len(request.value) == n


@pytest.mark.parametrize(("value", "says"), [
    (b"\x81\x01\xc0", "hold a map key that is not a string (int); use string keys"),
    (b"\x81\x91\x01\xc0", "hold a map key that is not a string (tuple); use string keys"),
    (b"\xd6\xff" + bytes(4), "hold a datetime, which is not plain data"),
    (b"\xd4\x05\x00", "hold a Ext, which is not plain data"),
])
def test_a_value_that_is_not_plain_data_is_refused(value: bytes, says: str) -> None:
    with pytest.raises(ChannelError, match=re.escape(says)):
        parse(_done(value))
    with pytest.raises(ChannelError, match=re.escape("a call's arguments " + says)):
        parse(_call(value))


_frames = st.lists(st.tuples(st.integers(1, 300), st.sampled_from(["call", "read", "done"]),
                             st.integers(0, 3_000)), max_size=60)


@settings(max_examples=100, deadline=None)
@given(_frames, st.integers(1_000, 4_000))
def test_a_flood_of_frames_is_read_in_order_within_the_frame_limit(
        frames: list[tuple[int, str, int]], max_frame: int) -> None:
    data = b""
    for ident, op, size in frames:
        data += frame(Call(ident, "t", {"blob": "x" * size}) if op == "call" else
                      Read(ident, "h1", 0, size) if op == "read" else Done(ident, "x" * size))
    read, write = os.pipe()
    writer = threading.Thread(target=_feed, args=(write, data))
    writer.start()
    reader = FrameReader(read, max_frame=max_frame)
    got: list[Any] = []
    try:
        while (request := reader.next()) is not None:
            got.append(request)
    except ChannelError as exc:
        said = str(exc)
        assert "over the channel's limit" in said or "ids must increase" in said
    finally:
        os.close(read)
        writer.join(timeout=10)
    assert [r.id for r in got] == sorted({r.id for r in got})
    assert all(len(frame(r)) - 4 <= max_frame for r in got)
    expected = []
    for ident, op, size in frames:
        encoded = len(frame(Call(ident, "t", {"blob": "x" * size}) if op == "call" else
                            Read(ident, "h1", 0, size) if op == "read" else
                            Done(ident, "x" * size))) - 4
        if encoded > max_frame or (expected and ident <= expected[-1]):
            break
        expected.append(ident)
    assert [r.id for r in got] == expected


def _feed(fd: int, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):  # the reader stopped: the rest is unread
        write_all(fd, data)
    os.close(fd)
