"""The adapter kit: the pieces every adapter shares, public so a user's own adapter keeps the
same laws as ours.

Owns metering a declared stream (refused the moment it delivers more, or at its end if fewer),
building the record a put mints, newest-first paging with an opaque cursor, and the one refusal
event. The law: a payload that does not match what it declared is never stored, and paging is a
total order (created_at, then ref) so no artifact is skipped or shown twice.
"""

from __future__ import annotations

import base64
import hashlib
import math
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import msgspec

from byref.events import Emitter
from byref.store.port import (
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactPage,
    ArtifactSizeMismatchError,
    PutOptions,
    Scope,
    mint_ref,
)
from byref.store.retention import Retention, expiry

Cause = Literal["missing", "expired", "other-scope", "absent", "deleted", "malformed-ref"]
"""Why a read found nothing. `absent`: no record in this scope, and the adapter cannot cheaply
tell a missing ref from another scope's."""


class Meter:
    """Counts (and optionally hashes) a stream against the byte count it declared."""

    def __init__(self, declared_bytes: int, *, digest: bool) -> None:
        if declared_bytes < 0:
            raise ValueError(f"declared_bytes must be >= 0, got {declared_bytes!r}")
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
        ref=ref or mint_ref(), kind=options.kind, media_type=options.media_type, bytes=nbytes,
        created_at=now, expires_at=expiry(now, options.ttl, retention), digest=digest,
        label=options.label, parent_refs=tuple(options.parent_refs),
        metadata=dict(options.metadata),
    )


def rechunk(data: bytes, size: int) -> Iterator[bytes]:
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
    """Pass a stream through and raise if it ends at a different size than its record states
    (the artifact was removed or damaged mid-read). This is a size check, not a digest check."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        yield chunk
    if seen != meta.bytes:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} ended after {seen:,} of {meta.bytes:,} bytes while being "
            "streamed: it was deleted or damaged mid-read. Read it again, or re-create it."
        )


def encode_cursor(meta: ArtifactMeta) -> str:
    raw = msgspec.json.encode([meta.created_at, meta.ref])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """(created_at, ref) of the last item of the previous page."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created_at, ref = msgspec.json.decode(base64.urlsafe_b64decode(padded))
        return float(created_at), str(ref)
    except (ValueError, TypeError, msgspec.DecodeError):
        raise ValueError(
            f"Invalid list cursor {cursor!r}; pass the next_cursor a previous page returned."
        ) from None


def check_limit(limit: int | None) -> None:
    if limit is not None and limit <= 0:
        raise ValueError(f"list limit must be a positive number of items, got {limit!r}")


def newest_first(metas: Iterable[ArtifactMeta]) -> list[ArtifactMeta]:
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


def evicted(emit: Emitter, scope: Scope, refs: Iterable[str]) -> tuple[str, ...]:
    done = tuple(refs)
    for ref in done:
        emit("evicted", ref=ref, scope=str(scope), reason="retention")
    return done


Clock = Callable[[], float]
