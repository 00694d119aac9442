"""The adapter kit: the pieces every adapter shares, public so a user's own adapter keeps the
same laws as ours.

Owns metering a declared stream (refused the moment it delivers more, or at its end if fewer),
verifying a streamed read (size and digest, last chunk held back), building the record a put
mints, newest-first paging with an opaque cursor, and the refusal events. The law: a payload that
does not match what it declared is never stored, a streamed read of wrong bytes always ends in an
error before its last chunk, and paging is a total order (created_at, then ref) so no artifact is
skipped or shown twice.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

import msgspec

from byref.errors import InvalidValue
from byref.events import Emitter
from byref.store.port import (
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactPage,
    ArtifactSizeMismatchError,
    PutOptions,
    Scope,
    mint_key,
)
from byref.store.retention import Retention, expiry

Cause = Literal[
    "missing", "expired", "other-scope", "absent", "deleted", "malformed-ref", "damaged"]
"""Why a read found nothing. `absent`: no record in this scope, and the adapter cannot cheaply
tell a missing ref from another scope's."""


class Meter:
    """Counts (and optionally hashes) a stream against the byte count it declared."""

    def __init__(self, declared_bytes: int, *, digest: bool) -> None:
        if declared_bytes < 0:
            raise InvalidValue(f"declared_bytes must be >= 0, got {declared_bytes!r}")
        self.declared = declared_bytes
        self.count = 0
        self._hasher = hashlib.sha256() if digest else None

    def feed(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """Yield the chunks through; raise `ArtifactSizeMismatchError` on any mismatch."""
        for raw in chunks:
            chunk = bytes(raw)
            self.count += len(chunk)
            if self.count > self.declared:
                raise self._mismatch(f"more than {self.declared:,}")
            if self._hasher is not None:
                self._hasher.update(chunk)
            if chunk:
                yield chunk
        if self.count != self.declared:
            raise self._mismatch(f"{self.count:,}")

    @property
    def digest(self) -> str | None:
        """The `sha256:` digest of the bytes fed so far, or None when not asked for."""
        return None if self._hasher is None else "sha256:" + self._hasher.hexdigest()

    def _mismatch(self, delivered: str) -> ArtifactSizeMismatchError:
        return ArtifactSizeMismatchError(
            f"Streamed payload declared {self.declared:,} bytes but delivered {delivered}; "
            "nothing was stored. Pass the payload's exact size as declared_bytes."
        )


class Stamp:
    """Creation times that never repeat within one store instance, so "newest first" is the
    order of puts even when the clock is coarse or frozen (ties across processes fall to ref)."""

    def __init__(self) -> None:
        self._last = float("-inf")
        self._lock = threading.Lock()

    def __call__(self, now: float) -> float:
        """A creation time at least `now` and strictly after the last one handed out."""
        with self._lock:
            self._last = max(now, math.nextafter(self._last, math.inf))
            return self._last


def new_meta(
    options: PutOptions, nbytes: int, digest: str | None, now: float, retention: Retention,
    *, ref: str | None = None,
) -> ArtifactMeta:
    """The record a put mints: a fresh ref (unless the adapter minted it earlier), expiry stated
    at mint."""
    return ArtifactMeta(
        ref=ref or mint_key(), kind=options.kind, media_type=options.media_type, bytes=nbytes,
        created_at=now, expires_at=expiry(now, options.ttl, retention), digest=digest,
        label=options.label, parent_refs=tuple(options.parent_refs),
        metadata=dict(options.metadata),
    )


def rechunk(data: bytes, size: int) -> Iterator[bytes]:
    """`data` as consecutive pieces of at most `size` bytes."""
    view = memoryview(data)
    for start in range(0, len(data), size):
        yield bytes(view[start : start + size])


def regroup(chunks: Iterable[bytes], size: int) -> Iterator[bytes]:
    """Re-cut a stream into pieces of exactly `size` bytes (the last may be shorter), holding at
    most one piece plus one incoming chunk."""
    buffer = bytearray()
    for chunk in chunks:
        buffer += chunk
        while len(buffer) >= size:
            yield bytes(buffer[:size])
            del buffer[:size]
    if buffer:
        yield bytes(buffer)


def exact_length(meta: ArtifactMeta, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Pass a stream through and raise if it ends at a different size than its record states.
    A size check only; `verified` is what the adapters use."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        yield chunk
    if seen != meta.bytes:
        raise _short(meta, seen)


HASH_TIMEOUT = 120.0
"""Seconds one chunk may take to hash in the background before the read gives up."""
_OVERLAP_MIN = 256 << 10  # smaller chunks hash inline: a thread hand-off would cost more
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _hash_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="byref-digest")
        return _pool


def _forget_pool() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool)


def verified(meta: ArtifactMeta, chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Pass a stream through, counting and (when the record has a digest) hashing as chunks go
    by, and hold the last chunk back until size and digest match: on a mismatch the iterator
    raises `ArtifactIntegrityError` instead of yielding it, so no consumer ever reads a whole
    stream of wrong bytes without an error. A stream that runs past its recorded size raises at
    once. Large chunks are hashed on a worker thread (hashlib releases the GIL) while the next
    chunk is read and the previous one consumed; at most three chunks are held."""
    hasher = hashlib.sha256() if meta.digest is not None else None
    seen, held = 0, None
    pending: Future[None] | None = None
    for raw in chunks:
        chunk = raw if type(raw) is bytes else bytes(raw)  # no copy of bytes; freeze the rest
        if not chunk:
            continue
        seen += len(chunk)
        if seen > meta.bytes:
            raise ArtifactIntegrityError(
                f"Artifact {meta.ref!r} ran past its recorded {meta.bytes:,} bytes while being "
                "streamed: it was overwritten or damaged. Re-create it; do not trust this copy."
            )
        if hasher is not None:
            if pending is not None:
                _wait(meta, pending)
                pending = None
            if len(chunk) >= _OVERLAP_MIN:
                pending = _hash_pool().submit(hasher.update, chunk)
            else:
                hasher.update(chunk)
        if held is not None:
            yield held
        held = chunk
    if pending is not None:
        _wait(meta, pending)
    if seen != meta.bytes:
        raise _short(meta, seen)
    if hasher is not None and "sha256:" + hasher.hexdigest() != meta.digest:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} failed its integrity check while being streamed: the bytes "
            f"read do not match {meta.digest!r}, so the last chunk was withheld. Re-create it; "
            "do not trust this copy."
        )
    if held is not None:
        yield held


def _wait(meta: ArtifactMeta, pending: Future[None]) -> None:
    try:
        pending.result(timeout=HASH_TIMEOUT)
    except FutureTimeout:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} could not be verified while being streamed: hashing one chunk "
            f"took over {HASH_TIMEOUT:.0f}s. The host is overloaded; read it again."
        ) from None


def _short(meta: ArtifactMeta, seen: int) -> ArtifactIntegrityError:
    return ArtifactIntegrityError(
        f"Artifact {meta.ref!r} ended after {seen:,} of {meta.bytes:,} bytes while being "
        "streamed: it was deleted or damaged mid-read. Read it again, or re-create it."
    )


def encode_cursor(meta: ArtifactMeta) -> str:
    """The list cursor that continues after `meta`."""
    return cursor_at(meta.created_at, meta.ref)


def cursor_at(created_at: float, ref: str) -> str:
    """The cursor after the item at (created_at, ref), e.g. a row whose record is damaged."""
    raw = msgspec.json.encode([created_at, ref])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(created_at, ref) of the last item of the previous page."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, ref = msgspec.json.decode(base64.urlsafe_b64decode(padded))
        return float(created_at), str(ref)
    except (ValueError, TypeError, msgspec.DecodeError):
        raise InvalidValue(
            f"Invalid list cursor {cursor!r}; pass the next_cursor a previous page returned."
        ) from None


def check_limit(limit: int | None) -> None:
    """Raise `ValueError` unless `limit` is None or a positive number of items."""
    if limit is not None and limit <= 0:
        raise InvalidValue(f"list limit must be a positive number of items, got {limit!r}")


def newest_first(metas: Iterable[ArtifactMeta]) -> list[ArtifactMeta]:
    """`metas` sorted newest first (ties broken by ref), the order `list` pages in."""
    return sorted(metas, key=lambda m: (m.created_at, m.ref), reverse=True)


def paginate(
    metas: Iterable[ArtifactMeta], kind: str | None, cursor: str | None, limit: int | None
) -> ArtifactPage:
    """Newest first; items strictly after `cursor`; at most `limit`; a cursor when more remain."""
    check_limit(limit)
    after = decode_cursor(cursor) if cursor is not None else None
    chosen = [
        m for m in newest_first(metas)
        if (kind is None or m.kind == kind) and (after is None or (m.created_at, m.ref) < after)
    ]
    if limit is None or len(chosen) <= limit:
        return ArtifactPage(chosen)
    return ArtifactPage(chosen[:limit], encode_cursor(chosen[limit - 1]))


def refused(emit: Emitter, scope: Scope, ref: str, cause: Cause) -> None:
    """The one absence, told truthfully to the operator (the caller only ever sees None)."""
    emit("refused", ref=ref, scope=str(scope), reason="missing-or-expired", cause=cause)


def damaged(emit: Emitter, scope: Scope, ref: str, error: ArtifactIntegrityError) -> None:
    """A record that no longer parses was skipped (by list, or by retention at put) so the rest
    of its scope keeps working; the operator is told which one and where it lives."""
    emit("refused", ref=ref, scope=str(scope), reason="damaged-record", cause="damaged",
         detail=str(error))


def evicted(emit: Emitter, scope: Scope, refs: Iterable[str]) -> tuple[str, ...]:
    """Emit an `evicted` event for each of `refs`; returns them as a tuple."""
    done = tuple(refs)
    for ref in done:
        emit("evicted", ref=ref, scope=str(scope), reason="retention")
    return done


Clock = Callable[[], float]
