"""Conformance cases for the optional streaming members and for more than one process.

Owns the laws that need a stream or a second process: a stream that does not match its declared
size is never stored, streaming round-trips, members are present and working or absent (never a
stub), an interrupted or crashed put leaves nothing visible, and two processes writing one scope
lose nothing. Child processes are spawned, bounded by a timeout, and killed if they overstay.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import queue
from collections.abc import Callable, Iterator

from byref.battery import PROCESS_TIMEOUT, CaseFailed, check, equal, raises, reap
from byref.store.conformance._cases import OPTS, Case, Kit, _refs
from byref.store.port import (
    ArtifactSizeMismatchError,
    ArtifactStore,
    PutOptions,
    Scope,
    can_get_stream,
    can_put_stream,
)


def size_mismatch(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    assert can_put_stream(s)
    raises(ArtifactSizeMismatchError, lambda: s.put_stream(scope, [b"12345"], 10, OPTS),
           "a stream delivering fewer bytes than declared")
    raises(ArtifactSizeMismatchError, lambda: s.put_stream(scope, [b"12345", b"67890"], 5, OPTS),
           "a stream delivering more bytes than declared")
    equal(_refs(s, scope), [], "list after refused streams")


def _irregular(data: bytes) -> Iterator[bytes]:
    sizes, at, i = [1, 7, 65_536, 3, 1 << 20, 0, 999_999], 0, 0
    while at < len(data):
        n = sizes[i % len(sizes)]
        yield data[at : at + n]
        at, i = at + n, i + 1


def streaming_round_trip(kit: Kit) -> None:
    s, w, scope = kit.store, kit.store, kit.scope()
    assert can_get_stream(s) and can_put_stream(w)
    data = os.urandom(3 * (1 << 20) + 12_345)
    meta = w.put_stream(scope, _irregular(data), len(data), PutOptions(kind="t/s", digest=True))
    equal(meta.bytes, len(data), "streamed put bytes")
    equal(meta.digest, "sha256:" + hashlib.sha256(data).hexdigest(), "streamed put digest")
    streamed = s.get_stream(scope, meta.ref)
    check(streamed is not None, "get_stream after put_stream answered None")
    assert streamed is not None
    equal(streamed.meta, meta, "get_stream meta")
    equal(hashlib.sha256(b"".join(streamed.chunks)).hexdigest(),
          hashlib.sha256(data).hexdigest(), "bytes streamed back")
    got = s.get(scope, meta.ref)
    equal(None if got is None else len(got.data), len(data), "get of a streamed artifact")
    plain = s.put(scope, b"", OPTS)
    back = s.get_stream(scope, plain.ref)
    equal(None if back is None else b"".join(back.chunks), b"", "empty payload streamed back")


def members_never_faked(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    for member in ("put_stream", "get_stream"):
        value = getattr(s, member, None)
        check(value is None or callable(value), f"{member} is present but not callable")
    if can_put_stream(s):
        try:
            meta = s.put_stream(scope, iter([b"ab", b"c"]), 3, OPTS)
        except NotImplementedError:
            raise CaseFailed("put_stream is present but raises NotImplementedError") from None
        got = s.get(scope, meta.ref)
        equal(None if got is None else got.data, b"abc", "bytes put by put_stream")
    if can_get_stream(s):
        meta = s.put(scope, b"xyz", OPTS)
        try:
            streamed = s.get_stream(scope, meta.ref)
        except NotImplementedError:
            raise CaseFailed("get_stream is present but raises NotImplementedError") from None
        equal(None if streamed is None else b"".join(streamed.chunks), b"xyz", "get_stream bytes")


class _Interrupted(Exception):
    pass


def interrupted_stream(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    assert can_put_stream(s)

    def chunks() -> Iterator[bytes]:
        yield b"x" * (1 << 20)
        raise _Interrupted("producer failed mid-stream")

    raises(_Interrupted, lambda: s.put_stream(scope, chunks(), 4 << 20, OPTS),
           "the producer's own error, propagated")
    equal(_refs(s, scope), [], "list after an interrupted stream")


# -- two processes ------------------------------------------------------------------------------
def _child_puts(opener: Callable[[], ArtifactStore], scope: Scope, who: int, count: int,
                barrier: object, out: object) -> None:
    store = opener()
    barrier.wait(PROCESS_TIMEOUT)  # type: ignore[attr-defined]
    made = []
    for i in range(count):
        data = f"writer {who} item {i} ".encode() * (i + 1)
        made.append((store.put(scope, data, OPTS).ref, hashlib.sha256(data).hexdigest()))
    store.close()
    out.put(made)  # type: ignore[attr-defined]


def _child_crash(opener: Callable[[], ArtifactStore], scope: Scope) -> None:
    store = opener()
    assert can_put_stream(store)

    def chunks() -> Iterator[bytes]:
        yield b"partial" * 200_000
        os._exit(17)

    store.put_stream(scope, chunks(), 10 << 20, OPTS)


def concurrent_puts(kit: Kit) -> None:
    opener, scope, count = kit.hook_reopen(), kit.scope(), 20
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_child_puts, args=(opener, scope, who, count, barrier, out))
             for who in (1, 2)]
    for proc in procs:
        proc.start()
    try:
        made = [out.get(timeout=PROCESS_TIMEOUT) for _ in procs]
    except queue.Empty:
        raise CaseFailed("a writer process reported nothing in time") from None
    finally:
        reap(procs)
    wrote = {ref: digest for batch in made for ref, digest in batch}
    equal(len(wrote), 2 * count, "distinct refs written by two processes")
    equal(sorted(_refs(kit.store, scope)), sorted(wrote), "list after concurrent puts")
    for ref, digest in wrote.items():
        got = kit.store.get(scope, ref)
        check(got is not None and hashlib.sha256(got.data).hexdigest() == digest,
              f"bytes of {ref!r} written by another process")


def crash_mid_put(kit: Kit) -> None:
    opener, scope = kit.hook_reopen(), kit.scope()
    proc = multiprocessing.get_context("spawn").Process(target=_child_crash, args=(opener, scope))
    proc.start()
    reap([proc])
    equal(proc.exitcode, 17, "exit code of the process that crashed mid-put")
    equal(_refs(kit.store, scope), [], "list after a crash mid-put")
    after = kit.store.put(scope, b"still works", OPTS)
    equal(_refs(kit.store, scope), [after.ref], "list after the next put")


STREAM_CASES: tuple[Case, ...] = (
    Case("streamed-size-mismatch-refused", "A stream that delivers more or fewer bytes than it "
         "declared is refused and nothing is stored.", size_mismatch, ("put_stream",)),
    Case("streaming-round-trip", "What put_stream stores, get_stream and get return whole, in "
         "any chunking.", streaming_round_trip, ("put_stream", "get_stream")),
    Case("streaming-members-never-faked", "Streaming members are present and working, or "
         "absent; never a stub.", members_never_faked),
    Case("interrupted-stream-leaves-nothing", "A producer failing mid-stream gets its own error "
         "back and leaves no artifact visible.", interrupted_stream, ("put_stream",)),
    Case("concurrent-puts-two-processes", "Two processes putting into one scope at once lose "
         "nothing and mix nothing up.", concurrent_puts),
    Case("crash-mid-put-invisible", "A process killed in the middle of a put leaves nothing "
         "visible, and the store keeps working.", crash_mid_put, ("put_stream",)),
)
