"""The shared engine of the two SQL adapters (SQLite, PostgreSQL): one schema, one set of queries.

Owns the table layout (`<prefix>_artifacts` holds one row per artifact and its JSON record,
`<prefix>_chunks` holds the payload cut into 1 MiB rows) and the verbs over it. The law: a put is
one transaction (chunks, retention under a per-scope lock, then the record), so a crash or a size
mismatch rolls back and leaves nothing visible; reads are snapshots; the payload streams both ways
without being held whole, verified as it passes; a damaged record is skipped by `list` and by
retention, and reported, so one bad row never breaks its scope.
"""

from __future__ import annotations

import builtins
import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import msgspec

from byref.events import Emitter
from byref.store.kit import (
    Meter,
    Stamp,
    check_limit,
    cursor_at,
    damaged,
    decode_cursor,
    evicted,
    new_meta,
    refused,
    regroup,
    verified,
)
from byref.store.port import (
    Artifact,
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactPage,
    PutOptions,
    Scope,
    StreamedArtifact,
    is_key,
    mint_key,
    parse_record,
    verify,
)
from byref.store.retention import Retention, plan_evictions, refuse_oversize

CHUNK = 1 << 20


class Tx(Protocol):
    """One statement runner inside a transaction; SQL uses `?` placeholders and `{a}`/`{c}`."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def count(self, sql: str, params: Sequence[Any] = ()) -> int: ...


def schema(blob: str, real: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS {a} (ref TEXT PRIMARY KEY, scope_key TEXT NOT NULL, "
        f"kind TEXT NOT NULL, created_at {real} NOT NULL, expires_at {real}, "
        "bytes BIGINT NOT NULL, meta TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS {a}_by_scope ON {a} (scope_key, created_at, ref)",
        f"CREATE TABLE IF NOT EXISTS {{c}} (ref TEXT NOT NULL, seq INTEGER NOT NULL, "
        f"data {blob} NOT NULL, PRIMARY KEY (ref, seq))",
    ]


class SqlStore(ABC):
    """The verbs, written once; subclasses supply transactions and the per-scope lock."""

    def __init__(
        self, *, retention: Retention | None, clock: Callable[[], float] | None,
        emit: Emitter | None,
    ) -> None:
        self.retention = retention or Retention()
        self.clock = clock or time.time
        self.emit = emit or Emitter(clock=self.clock)
        self._stamp = Stamp()

    @abstractmethod
    def _write(self) -> AbstractContextManager[Tx]: ...
    @abstractmethod
    def _read(self) -> AbstractContextManager[Tx]: ...
    @abstractmethod
    def _lock_scope(self, tx: Tx, scope_key: str) -> None: ...

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        return self.put_stream(scope, [bytes(data)], len(data), options)

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        with self._read() as tx:
            return self._live(tx, scope, ref)

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        with self._read() as tx:
            meta = self._live(tx, scope, ref)
            if meta is None:
                return None
            rows = tx.rows("SELECT data FROM {c} WHERE ref = ? ORDER BY seq", (ref,))
        data = b"".join(bytes(r[0]) for r in rows)
        verify(meta, data)
        return Artifact(meta, data)

    def delete(self, scope: Scope, ref: str) -> bool:
        with self._write() as tx:
            gone = tx.count("DELETE FROM {a} WHERE ref = ? AND scope_key = ?", (ref, scope.key()))
            if gone:
                tx.count("DELETE FROM {c} WHERE ref = ?", (ref,))
        return gone > 0

    def list(
        self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
        limit: int | None = None,
    ) -> ArtifactPage:
        check_limit(limit)
        sql = ("SELECT ref, created_at, meta FROM {a} WHERE scope_key = ? "
               "AND (expires_at IS NULL OR expires_at > ?)")
        params: list[Any] = [scope.key(), self.clock()]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if cursor is not None:
            created_at, ref = decode_cursor(cursor)
            sql += " AND (created_at < ? OR (created_at = ? AND ref < ?))"
            params += [created_at, created_at, ref]
        sql += " ORDER BY created_at DESC, ref DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit + 1)
        with self._read() as tx:
            rows = tx.rows(sql, params)
        page = rows if limit is None else rows[:limit]
        metas = self._parsed(scope, [(r[0], r[2]) for r in page])
        if limit is None or len(rows) <= limit:
            return ArtifactPage(metas)
        # The cursor comes from the row's own columns, so a damaged last record cannot end
        # the paging early (the page may hold fewer than `limit` items).
        return ArtifactPage(metas, cursor_at(float(page[-1][1]), str(page[-1][0])))

    def close(self) -> None:
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        """One transaction: chunks, then retention under the scope lock, then the record. A size
        mismatch or a crash rolls it all back."""
        refuse_oversize(declared_bytes, self.retention)
        meter, ref, key = Meter(declared_bytes, digest=options.digest), mint_key(), scope.key()
        with self._write() as tx:
            for seq, piece in enumerate(regroup(meter.feed(chunks), CHUNK)):
                tx.count("INSERT INTO {c} (ref, seq, data) VALUES (?, ?, ?)", (ref, seq, piece))
            self._lock_scope(tx, key)
            now = self.clock()
            stamp = self._stamp(now)
            meta = new_meta(options, meter.count, meter.digest, stamp, self.retention, ref=ref)
            expired = [r[0] for r in tx.rows(
                "SELECT ref FROM {a} WHERE scope_key = ? AND expires_at <= ?", (key, now))]
            self._remove(tx, expired)
            live = [] if not self.retention.bounded else self._parsed(scope, tx.rows(
                "SELECT ref, meta FROM {a} WHERE scope_key = ?", (key,)))
            gone = plan_evictions(live, meter.count, self.retention)
            self._remove(tx, gone)
            tx.count(
                "INSERT INTO {a} (ref, scope_key, kind, created_at, expires_at, bytes, meta) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (ref, key, meta.kind, meta.created_at, meta.expires_at, meta.bytes,
                 msgspec.json.encode(meta.to_json()).decode()),
            )
        for old in expired:
            self.emit("expired", ref=old, scope=str(scope))
        self.emit("minted", ref=ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return dataclasses.replace(meta, evicted=evicted(self.emit, scope, gone))

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        """Chunks fetched one row at a time, size- and digest-checked as they pass (the last
        chunk is held back until both match)."""
        meta = self.head(scope, ref)
        if meta is None:
            return None
        return StreamedArtifact(meta, verified(meta, self._chunks(ref)))

    # -- internals -----------------------------------------------------------------------------
    def _chunks(self, ref: str) -> Iterator[bytes]:
        seq = 0
        while True:
            with self._read() as tx:
                rows = tx.rows("SELECT data FROM {c} WHERE ref = ? AND seq = ?", (ref, seq))
            if not rows:
                return
            yield bytes(rows[0][0])
            seq += 1

    def _live(self, tx: Tx, scope: Scope, ref: str) -> ArtifactMeta | None:
        if not is_key(ref):
            refused(self.emit, scope, ref, "malformed-ref")
            return None
        rows = tx.rows("SELECT meta, scope_key FROM {a} WHERE ref = ?", (ref,))
        if not rows or rows[0][1] != scope.key():
            refused(self.emit, scope, ref, "other-scope" if rows else "missing")
            return None
        meta = _meta(rows[0][0], ref)
        if meta.expires_at is not None and meta.expires_at <= self.clock():
            with self._write() as wtx:
                self._remove(wtx, [ref])
            self.emit("expired", ref=ref, scope=str(scope))
            refused(self.emit, scope, ref, "expired")
            return None
        return meta

    def _parsed(self, scope: Scope, rows: Iterable[Sequence[Any]]) -> builtins.list[ArtifactMeta]:
        """(ref, record) rows parsed; a damaged record is skipped and reported, not raised."""
        out = []
        for ref, raw in rows:
            try:
                out.append(_meta(raw, ref))
            except ArtifactIntegrityError as exc:
                damaged(self.emit, scope, ref, exc)
        return out

    def _remove(self, tx: Tx, refs: Sequence[str]) -> None:
        for ref in refs:
            tx.count("DELETE FROM {a} WHERE ref = ?", (ref,))
            tx.count("DELETE FROM {c} WHERE ref = ?", (ref,))


def _meta(raw: str, ref: str) -> ArtifactMeta:
    return parse_record(raw, f"the artifacts table, row {ref}")
