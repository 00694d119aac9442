"""Code mode's channel parser: whatever bytes the child writes, the host gets requests in order
or a ChannelError, never another exception and never a frame over the limit read."""

from __future__ import annotations

import contextlib
import os
import struct

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.tools.code_mode.channel import (
    MAX_FRAME,
    Answer,
    Call,
    ChannelError,
    Done,
    FrameReader,
    Read,
    frame,
    parse,
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
