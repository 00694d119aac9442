"""Code mode's channel: length-prefixed msgpack frames between the sandboxed program and its host.

The law: the host trusts nothing the child sends. A frame is a 4-byte big-endian length and that
many bytes of msgpack; a length over `MAX_FRAME` is refused before a byte of its body is read,
and a body is decoded only as one of the child's five requests (`Call`, `Read`, `Search`,
`Describe`, `Done`), each with a request id greater than every id before it, whose values (a
call's arguments, the return value) are plain data — maps with string keys, lists, strings,
bytes, numbers, booleans, nil — at most `MAX_DEPTH` deep and `MAX_VALUES` in all, so what the
host holds for a frame is bounded and walking it needs no deep recursion. Anything else — a
short frame, bytes that are not msgpack, an unknown `op`, a field of the wrong type, an id out
of order, a value too deep or too large — is a `ChannelError`, and the host stops serving that
channel (the child then meets a closed channel). The host answers each request with one
`Answer` frame carrying its id.

The child's side (`code_child.py`) speaks the same frames with the same library; it runs inside
the sandbox and never reaches anything but its end of the socket.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import msgspec

from byref.errors import Refused

MAX_FRAME = 4 << 20
"""The largest frame body either side accepts (a call's literal arguments, a return value)."""
READ_MAX = 1 << 20
"""The most bytes one `Read` may ask for (a handle streams in chunks of at most this)."""
MAX_DEPTH = 64
"""How deep a request's value may nest (lists and maps inside each other)."""
MAX_VALUES = 1 << 17
"""How many values (each list, map, key and item) one request's value may hold: what a frame
costs the host once decoded (~70 bytes a value at most) is bounded by it, not only by bytes."""
_HEADER = struct.Struct(">I")
_LEAVES = (str, int, float, bool, bytes, type(None))


class ChannelError(Refused):
    """The child broke the channel's protocol; the host stops serving it (text says how)."""

    reason = "channel-protocol"


class Call(msgspec.Struct, tag_field="op", tag="call", forbid_unknown_fields=True):
    """Run tool `tool` with `args` (handles in them as `{"$handle": id}`)."""

    id: int
    tool: str
    args: dict[str, Any]


class Read(msgspec.Struct, tag_field="op", tag="read", forbid_unknown_fields=True):
    """Up to `size` bytes of a handle's data from `offset`."""

    id: int
    handle: str
    offset: int
    size: int


class Search(msgspec.Struct, tag_field="op", tag="search", forbid_unknown_fields=True):
    """The tools matching `query`, at most `limit`."""

    id: int
    query: str
    limit: int = 5


class Describe(msgspec.Struct, tag_field="op", tag="describe", forbid_unknown_fields=True):
    """A tool's signature and description (`tool` empty: every callable tool's name)."""

    id: int
    tool: str


class Done(msgspec.Struct, tag_field="op", tag="done", forbid_unknown_fields=True):
    """The program's return value (its last expression), sent once, as it ends."""

    id: int
    value: Any = None


Request = Call | Read | Search | Describe | Done


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    """The host's answer to request `id`: a value, or an error the child raises."""

    id: int
    value: Any = None
    error: str | None = None
    reason: str | None = None


_DECODER = msgspec.msgpack.Decoder(Request)
_ENCODER = msgspec.msgpack.Encoder()


def frame(message: msgspec.Struct) -> bytes:
    """One frame: the message as msgpack, after its 4-byte length."""
    body = _ENCODER.encode(message)
    return _HEADER.pack(len(body)) + body


def parse(body: bytes) -> Request:
    """A frame body as one of the child's requests; `ChannelError` saying why it is not one."""
    try:
        request = _DECODER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise ChannelError(f"a frame is not a request ({str(exc)[:200]})") from exc
    if isinstance(request, Call):
        _plain(request.args, "a call's arguments")
    elif isinstance(request, Done):
        _plain(request.value, "the return value")
    return request


def _plain(value: Any, what: str) -> None:
    """Refuse `value` unless it is plain data within `MAX_DEPTH` and `MAX_VALUES` (walked
    without recursion: the check itself cannot overflow the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    count = 1
    while stack:
        item, depth = stack.pop()
        if isinstance(item, _LEAVES):
            continue
        if not isinstance(item, list | dict):
            raise ChannelError(f"{what} hold a {type(item).__name__}, which is not plain data; "
                               "send strings, numbers, booleans, None, lists and dicts")
        if depth >= MAX_DEPTH and item:
            raise ChannelError(f"{what} nest deeper than {MAX_DEPTH} levels; flatten them")
        count += len(item) * (2 if isinstance(item, dict) else 1)
        if count > MAX_VALUES:
            raise ChannelError(f"{what} hold more than {MAX_VALUES:,} values; pass large data "
                               "as a handle or a file instead")
        if isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
            continue
        for key, v in item.items():
            if not isinstance(key, str):
                raise ChannelError(f"{what} hold a map key that is not a string "
                                   f"({type(key).__name__}); use string keys")
            stack.append((v, depth + 1))


class FrameReader:
    """Reads the child's frames from a descriptor, in order, refusing what breaks the protocol.

    `next()` is the next request, or None at a clean end (the child closed its end between
    frames); a torn frame, an oversized length, an undecodable body or an id not above the
    last one raises `ChannelError`."""

    def __init__(self, fd: int, *, max_frame: int = MAX_FRAME) -> None:
        self.fd = fd
        self.max_frame = max_frame
        self.last_id = 0

    def next(self) -> Request | None:
        """The next request, or None when the child has closed its end."""
        header = self._exactly(_HEADER.size, at_start=True)
        if header is None:
            return None
        (length,) = _HEADER.unpack(header)
        if length > self.max_frame:
            raise ChannelError(f"a frame of {length:,} bytes is over the channel's limit of "
                               f"{self.max_frame:,}")
        body = self._exactly(length, at_start=False)
        assert body is not None
        request = parse(body)
        if request.id <= self.last_id:
            raise ChannelError(f"request id {request.id} came after id {self.last_id} "
                               "(ids must increase)")
        self.last_id = request.id
        return request

    def _exactly(self, n: int, *, at_start: bool) -> bytes | None:
        chunks: list[bytes] = []
        left = n
        while left:
            chunk = os.read(self.fd, min(left, 1 << 20))
            if not chunk:
                if at_start and left == n:
                    return None
                raise ChannelError(f"the channel closed inside a frame ({n - left} of {n} "
                                   "bytes)")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd` (a socket may take it in pieces)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
