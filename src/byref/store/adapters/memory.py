"""The in-memory adapter (`memory://`): a real store for tests, notebooks and short-lived agents.

Keeps every promise of the port in process memory, bounded by default (256 MiB and 10,000
artifacts per scope) so a runaway agent cannot eat the host. Payloads are private to the instance
and process, so the battery's two-process cases are declared, not faked; its damage cases reach
the stored bytes in the same process (`byref.store.conformance.corruption`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable

from byref.events import Emitter
from byref.store.kit import (
    Meter,
    Stamp,
    evicted,
    new_meta,
    paginate,
    rechunk,
    refused,
    verified,
)
from byref.store.port import (
    Artifact,
    ArtifactMeta,
    ArtifactPage,
    PutOptions,
    Scope,
    StreamedArtifact,
    sha256_digest,
    verify,
)
from byref.store.retention import Retention, is_expired, plan_evictions, refuse_oversize

DEFAULT_RETENTION = Retention(max_bytes_per_scope=256 << 20, max_count_per_scope=10_000)


class MemoryStore:
    """The `memory://` adapter: artifacts in process memory, bounded per scope."""
    def __init__(
        self,
        *,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
        emit: Emitter | None = None,
    ) -> None:
        self.retention = retention if retention is not None else DEFAULT_RETENTION
        self.clock = clock
        self.emit = emit or Emitter(clock=clock)
        self._items: dict[Scope, dict[str, tuple[ArtifactMeta, bytes]]] = {}
        self._owner: dict[str, Scope] = {}
        self._lock = threading.RLock()
        self._stamp = Stamp()

    @property
    def url(self) -> str:
        """The URL that opens a store of this kind (`memory://`; not this instance)."""
        return "memory://"

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        """Store `data` under a new ref in `scope`, applying retention; returns its metadata."""
        data = bytes(data)
        refuse_oversize(len(data), self.retention)
        digest = sha256_digest(data) if options.digest else None
        return self._commit(scope, data, options, digest)

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref` in `scope`, or None when it is absent, expired or another
        scope's."""
        found = self._live(scope, ref)
        return None if found is None else found[0]

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        """The artifact `ref` in `scope` with its bytes verified, or None when absent; raises
        `ArtifactIntegrityError` for damaged bytes."""
        found = self._live(scope, ref)
        if found is None:
            return None
        verify(found[0], found[1])
        return Artifact(found[0], found[1])

    def delete(self, scope: Scope, ref: str) -> bool:
        """Remove `ref` from `scope`; returns whether it was there."""
        with self._lock:
            gone = self._items.get(scope, {}).pop(ref, None) is not None
            if gone:
                self._owner.pop(ref, None)
        return gone

    def list(
        self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
        limit: int | None = None,
    ) -> ArtifactPage:
        """One page of `scope`'s live artifacts, newest first, optionally of one `kind`,
        continuing from `cursor`."""
        with self._lock:
            self._sweep(scope, self.clock())
            metas = [m for m, _ in self._items.get(scope, {}).values()]
        return paginate(metas, kind, cursor, limit)

    def close(self) -> None:
        """Nothing to release; the artifacts stay until the store is dropped."""
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        """A memory store keeps payloads whole in RAM, so a streamed put lands in one buffer; the
        declared size is enforced chunk by chunk and nothing is kept on a mismatch."""
        refuse_oversize(declared_bytes, self.retention)
        meter = Meter(declared_bytes, digest=options.digest)
        buffer = bytearray()
        for chunk in meter.feed(chunks):
            buffer += chunk
        return self._commit(scope, bytes(buffer), options, meter.digest)

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        """Chunks of the stored payload, size- and digest-checked as they pass (the last chunk
        is held back until both match)."""
        found = self._live(scope, ref)
        if found is None:
            return None
        meta, data = found
        return StreamedArtifact(meta, verified(meta, rechunk(data, 1 << 20)))

    # -- internals -----------------------------------------------------------------------------
    def _commit(
        self, scope: Scope, data: bytes, options: PutOptions, digest: str | None
    ) -> ArtifactMeta:
        now = self.clock()
        meta = new_meta(options, len(data), digest, self._stamp(now), self.retention)
        with self._lock:
            self._sweep(scope, now)
            bucket = self._items.setdefault(scope, {})
            gone = plan_evictions([m for m, _ in bucket.values()], len(data), self.retention)
            for ref in gone:
                del bucket[ref]
                self._owner.pop(ref, None)
            bucket[meta.ref] = (meta, data)
            self._owner[meta.ref] = scope
        self.emit("minted", ref=meta.ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return dataclasses.replace(meta, evicted=evicted(self.emit, scope, gone))

    def _live(self, scope: Scope, ref: str) -> tuple[ArtifactMeta, bytes] | None:
        now = self.clock()
        with self._lock:
            found = self._items.get(scope, {}).get(ref)
            if found is not None and is_expired(found[0], now):
                self._drop_expired(scope, ref)
                refused(self.emit, scope, ref, "expired")
                return None
            if found is None:
                owner = self._owner.get(ref)
                refused(self.emit, scope, ref, "other-scope" if owner else "missing")
        return found

    def _sweep(self, scope: Scope, now: float) -> None:
        bucket = self._items.get(scope, {})
        for ref in [r for r, (m, _) in bucket.items() if is_expired(m, now)]:
            self._drop_expired(scope, ref)

    def _drop_expired(self, scope: Scope, ref: str) -> None:
        del self._items[scope][ref]
        self._owner.pop(ref, None)
        self.emit("expired", ref=ref, scope=str(scope))
