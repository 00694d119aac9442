"""The in-memory adapter: a real store for tests, notebooks and short-lived agents.

Keeps every promise of the port in process memory; payloads are private to the instance, so the
integrity case of the conformance battery (damage staged from outside) is declared, not faked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

from byref.events import Emitter
from byref.store.port import (
    Artifact,
    ArtifactMeta,
    ArtifactSizeMismatchError,
    PutOptions,
    Scope,
    StreamedArtifact,
    mint_ref,
    sha256_digest,
    verify,
)
from byref.store.retention import Retention, expiry, is_expired, plan_evictions


class MemoryStore:
    def __init__(
        self,
        *,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
        emit: Emitter | None = None,
    ) -> None:
        self.retention = retention or Retention()
        self.clock = clock
        self.emit = emit or Emitter(clock=clock)
        self._items: dict[Scope, dict[str, tuple[ArtifactMeta, bytes]]] = {}
        self._lock = threading.RLock()

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        data = bytes(data)
        now = self.clock()
        meta = ArtifactMeta(
            ref=mint_ref(), kind=options.kind, media_type=options.media_type, bytes=len(data),
            created_at=now, expires_at=expiry(now, options.ttl, self.retention),
            digest=sha256_digest(data) if options.digest else None, label=options.label,
            parent_refs=tuple(options.parent_refs),
        )
        with self._lock:
            bucket = self._items.setdefault(scope, {})
            self._sweep(scope, now)
            for ref in plan_evictions([m for m, _ in bucket.values()], len(data), self.retention):
                del bucket[ref]
                self.emit("evicted", ref=ref, scope=str(scope), reason="retention")
            bucket[meta.ref] = (meta, data)
        self.emit("minted", ref=meta.ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return meta

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        found = self._live(scope, ref)
        return None if found is None else found[0]

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        found = self._live(scope, ref)
        if found is None:
            return None
        verify(found[0], found[1])
        return Artifact(found[0], found[1])

    def delete(self, scope: Scope, ref: str) -> bool:
        with self._lock:
            return self._items.get(scope, {}).pop(ref, None) is not None

    def list(self, scope: Scope, kind: str | None = None) -> list[ArtifactMeta]:
        with self._lock:
            self._sweep(scope, self.clock())
            metas = [m for m, _ in self._items.get(scope, {}).values()]
        return sorted(
            (m for m in metas if kind is None or m.kind == kind),
            key=lambda m: (m.created_at, m.ref),
        )

    def close(self) -> None:
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        data = b"".join(chunks)
        if len(data) != declared_bytes:
            raise ArtifactSizeMismatchError(
                f"Streamed payload declared {declared_bytes:,} bytes but delivered {len(data):,}; "
                "nothing was stored."
            )
        return self.put(scope, data, options)

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        found = self._live(scope, ref)
        if found is None:
            return None
        meta, data = found
        return StreamedArtifact(meta, _chunked(data))

    # -- internals -----------------------------------------------------------------------------
    def _live(self, scope: Scope, ref: str) -> tuple[ArtifactMeta, bytes] | None:
        now = self.clock()
        with self._lock:
            found = self._items.get(scope, {}).get(ref)
            if found is not None and is_expired(found[0], now):
                del self._items[scope][ref]
                self.emit("expired", ref=ref, scope=str(scope))
                found = None
        if found is None:
            self.emit("refused", ref=ref, scope=str(scope), reason="missing-or-expired")
        return found

    def _sweep(self, scope: Scope, now: float) -> None:
        bucket = self._items.get(scope, {})
        for ref in [r for r, (m, _) in bucket.items() if is_expired(m, now)]:
            del bucket[ref]
            self.emit("expired", ref=ref, scope=str(scope))


def _chunked(data: bytes, size: int = 1 << 16) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]
