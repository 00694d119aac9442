"""Conformance cases for damaged payloads: what `get` and `get_stream` do with wrong bytes.

Owns the law that a stored payload altered beside the port (any single byte, same-length damage,
truncation, extension) is refused by every read: `get` raises `ArtifactIntegrityError`, and a
`get_stream` read to its end raises it too, before the stream's last chunk, so no consumer is
handed a complete stream of wrong bytes. The damage is staged by the harness's `rewrite` hook.
"""

from __future__ import annotations

import os

from byref.battery import CaseFailed, check, equal, raises
from byref.store.conformance._cases import OPTS, Case, Kit
from byref.store.port import (
    ArtifactIntegrityError,
    ArtifactStore,
    PutOptions,
    Scope,
    can_get_stream,
)

MIB = 1 << 20
SIZE = 2 * MIB + 3
"""Three chunks at the 1 MiB granularity every adapter we ship streams in; the last is short."""


def _flips(data: bytes) -> dict[str, bytes]:
    n, out = len(data), {}
    for at in sorted({0, 1, 4095, 65_535, 65_536, MIB - 1, MIB, MIB + 1, n // 2, n - 2, n - 1}):
        damaged = bytearray(data)
        damaged[at] ^= 0x01
        out[f"byte {at:,} flipped"] = bytes(damaged)
    out["every byte zeroed"] = bytes(n)
    out["first two MiB swapped"] = data[MIB : 2 * MIB] + data[:MIB] + data[2 * MIB :]
    out["another payload of the same size"] = os.urandom(n)
    return out


def _resized(data: bytes) -> dict[str, bytes]:
    return {"one byte short": data[:-1], "one byte more": data + b"\x00", "emptied": b"",
            "last chunk missing": data[: 2 * MIB], "doubled": data + data}


def _stream_refused(s: ArtifactStore, scope: Scope, ref: str, damaged: bytes, what: str) -> None:
    assert can_get_stream(s)
    streamed = s.get_stream(scope, ref)
    check(streamed is not None, f"{what}: get_stream answered None")
    assert streamed is not None
    received = 0
    try:
        for chunk in streamed.chunks:
            received += len(chunk)
    except ArtifactIntegrityError:
        pass
    else:
        raise CaseFailed(f"{what}: get_stream yielded {received:,} bytes and ended without "
                         "ArtifactIntegrityError")
    if len(damaged) == SIZE:
        check(received < SIZE, f"{what}: get_stream handed over all {SIZE:,} wrong bytes "
                               "before raising; the last chunk must be withheld")


def _refused(kit: Kit, scope: Scope, ref: str, damages: dict[str, bytes], label: str) -> None:
    s, rewrite = kit.store, kit.hook_rewrite()
    for what, damaged in damages.items():
        rewrite(scope, ref, damaged)
        raises(ArtifactIntegrityError, lambda: s.get(scope, ref), f"{label}, {what}: get")
        if can_get_stream(s):
            _stream_refused(s, scope, ref, damaged, f"{label}, {what}")


def damage_refused(kit: Kit) -> None:
    s, scope, rewrite = kit.store, kit.scope(), kit.hook_rewrite()
    data = os.urandom(SIZE)
    digested = s.put(scope, data, PutOptions(kind="test/bytes", digest=True))
    plain = s.put(scope, data, OPTS)
    _refused(kit, scope, digested.ref, {**_flips(data), **_resized(data)}, "digested")
    _refused(kit, scope, plain.ref, _resized(data), "undigested")
    for meta in (digested, plain):  # restored bytes read back: the hook reached the real payload
        rewrite(scope, meta.ref, data)
        got = s.get(scope, meta.ref)
        equal(None if got is None else got.data == data, True, "get after restoring the bytes")
        if can_get_stream(s):
            streamed = s.get_stream(scope, meta.ref)
            equal(None if streamed is None else b"".join(streamed.chunks) == data, True,
                  "get_stream after restoring the bytes")


DAMAGE_CASES: tuple[Case, ...] = (
    Case("damaged-bytes-refused-everywhere", "Any single-byte flip (first, last, chunk edges), "
         "same-length damage, truncation or extension of a stored payload is refused by get and "
         "by get_stream, which raises before its last chunk: no consumer reads a complete stream "
         "of wrong bytes without an error.", damage_refused),
)
