"""Digests on the streaming path: `kit.verified` holds the last chunk back until size and digest
match, the battery catches a store that streams wrong bytes, and the bench reports what it costs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.bench.library.store import stream_digest_cost
from byref.cli.bench.store import format_bench
from byref.store import ArtifactIntegrityError, ArtifactMeta, MemoryStore, Scope, StreamedArtifact
from byref.store.conformance.corruption import BUILTIN_DAMAGE
from byref.store.conformance.runner import CASES, StoreBattery, run_case
from byref.store.kit import rechunk, verified


def _meta(data: bytes, *, digest: bool = True) -> ArtifactMeta:
    return ArtifactMeta(
        ref="art_" + "A" * 22, kind="k", media_type="application/octet-stream", bytes=len(data),
        created_at=0.0, digest="sha256:" + hashlib.sha256(data).hexdigest() if digest else None)


def _cuts(data: bytes, sizes: list[int]) -> Iterator[bytes]:
    at, i = 0, 0
    while at < len(data):
        n = sizes[i % len(sizes)]
        yield data[at : at + n]
        at, i = at + n, i + 1


@given(st.binary(min_size=1, max_size=3000), st.lists(st.integers(0, 700), min_size=1,
                                                       max_size=6).filter(any),
       st.integers(0, 10_000), st.integers(1, 255))
def test_any_single_byte_flip_is_refused_before_the_last_chunk(
    data: bytes, sizes: list[int], where: int, mask: int
) -> None:
    meta = _meta(data)
    assert b"".join(verified(meta, _cuts(data, sizes))) == data
    damaged = bytearray(data)
    damaged[where % len(data)] ^= mask
    received = bytearray()
    with pytest.raises(ArtifactIntegrityError, match=r"so the last chunk was withheld"):
        for chunk in verified(meta, _cuts(bytes(damaged), sizes)):
            received += chunk
    assert len(received) < len(data)


@given(st.binary(max_size=2000), st.integers(-5, 5).filter(bool), st.booleans())
def test_a_stream_of_another_size_is_refused(data: bytes, delta: int, digest: bool) -> None:
    meta = _meta(data, digest=digest)
    wrong = data + b"\x00" * delta if delta > 0 else data[:delta]
    if len(wrong) == len(data):
        return  # data shorter than the cut: nothing was removed
    with pytest.raises(ArtifactIntegrityError, match=r"while being streamed"):
        b"".join(verified(meta, rechunk(wrong, 7)))


def test_size_messages_are_pinned() -> None:
    meta = _meta(b"abcdef")
    with pytest.raises(ArtifactIntegrityError) as short:
        b"".join(verified(meta, [b"abc"]))
    assert str(short.value) == (
        f"Artifact {meta.ref!r} ended after 3 of 6 bytes while being streamed: it was deleted "
        "or damaged mid-read. Read it again, or re-create it.")
    with pytest.raises(ArtifactIntegrityError) as long:
        b"".join(verified(meta, [b"abcdef", b"g"]))
    assert str(long.value) == (
        f"Artifact {meta.ref!r} ran past its recorded 6 bytes while being streamed: it was "
        "overwritten or damaged. Re-create it; do not trust this copy.")


def test_large_chunks_hashed_on_the_worker_still_verify() -> None:
    data = bytes(range(256)) * (4 << 12)  # 4 MiB in 1 MiB chunks: the threaded path
    meta = _meta(data)
    assert b"".join(verified(meta, rechunk(data, 1 << 20))) == data
    damaged = data[:-1] + b"\x00"  # the last byte was 0xff
    with pytest.raises(ArtifactIntegrityError):
        b"".join(verified(meta, rechunk(damaged, 1 << 20)))


class UnverifiedStream(MemoryStore):
    """Streams what it holds without checking: the old `get_stream`."""

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        found = self._live(scope, ref)
        return None if found is None else StreamedArtifact(found[0], rechunk(found[1], 1 << 20))


class LateVerifiedStream(MemoryStore):
    """Checks the digest only after every chunk was handed over."""

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        found = self._live(scope, ref)
        if found is None:
            return None
        meta, data = found

        def chunks() -> Iterator[bytes]:
            yield from rechunk(data, 1 << 20)
            if "sha256:" + hashlib.sha256(data).hexdigest() != meta.digest:
                raise ArtifactIntegrityError("too late")

        return StreamedArtifact(meta, chunks())


def _damage_case():  # type: ignore[no-untyped-def]
    return next(c for c in CASES if c.name == "damaged-bytes-refused-everywhere")


@pytest.mark.parametrize(("store", "why"), [
    (UnverifiedStream, "get_stream yielded 2,097,155 bytes and ended without "
                       "ArtifactIntegrityError"),
    (LateVerifiedStream, "get_stream handed over all 2,097,155 wrong bytes before raising; the "
                         "last chunk must be withheld"),
])
def test_the_battery_catches_streams_of_wrong_bytes(store: type[MemoryStore], why: str) -> None:
    harness = StoreBattery(name="under-test", create_store=store,
                      rewrite=BUILTIN_DAMAGE["memory"].rewrite)
    result = run_case(_damage_case(), harness)
    assert result.outcome == "failed"
    assert result.detail == f"CaseFailed: digested, byte 0 flipped: {why}"


def test_the_damage_case_needs_the_rewrite_hook() -> None:
    result = run_case(_damage_case(), StoreBattery(name="under-test", create_store=MemoryStore))
    assert result.outcome == "failed"
    assert result.detail == (
        "case 'damaged-bytes-refused-everywhere' needs the harness hook 'rewrite', which was not "
        "supplied; supply the hook, or declare the case with a reason")


def test_bench_reports_stream_throughput_with_and_without_digest() -> None:
    figures = stream_digest_cost("memory://", nbytes=2 << 20, rounds=1)
    assert set(figures) == {"bytes", "plain_mb_s", "verified_mb_s", "verified_vs_plain"}
    assert figures["verified_vs_plain"] == pytest.approx(
        figures["verified_mb_s"] / figures["plain_mb_s"], abs=1e-3)
    report = {"baseline": {}, "stream_bytes": 1 << 20, "adapters": {"memory": {
        "throughput": {}, "streamed": {"skipped": "in memory"}, "stream_digest": figures}}}
    line = format_bench(report).splitlines()[-1]
    assert line == (f"memory    get_stream 2 MB: plain {figures['plain_mb_s']} MB/s, "
                    f"digest-verified {figures['verified_mb_s']} MB/s "
                    f"(×{figures['verified_vs_plain']})")
