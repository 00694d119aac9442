"""The SQLite adapter (`sqlite:///relative.db`, `sqlite:////absolute.db`): one server, one file.

Owns opening the database (WAL journal, a busy timeout so several processes may share the file)
and the two connections the shared SQL engine runs on: a writer (BEGIN IMMEDIATE, so retention in
a scope is serialized across processes) and a reader (snapshots that do not wait for writers).
The law is the engine's: a put is one transaction, so nothing partial is ever visible.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from byref.events import Emitter
from byref.store._sql import SqlStore, Tx, schema
from byref.store.port import StoreUnavailableError
from byref.store.retention import Retention

BUSY_TIMEOUT_MS = 60_000


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection, prefix: str) -> None:
        self._conn, self._prefix = conn, prefix

    def _sql(self, sql: str) -> str:
        return sql.replace("{a}", f"{self._prefix}_artifacts").replace(
            "{c}", f"{self._prefix}_chunks")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(self._sql(sql), tuple(params)).fetchall()

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(self._sql(sql), tuple(params)).rowcount


class SqliteStore(SqlStore):
    """The `sqlite://` adapter: records and chunked payloads in one SQLite file, safe across
    processes."""
    def __init__(
        self,
        path: str | Path,
        *,
        table: str = "byref",
        retention: Retention | None = None,
        clock: Callable[[], float] | None = None,
        emit: Emitter | None = None,
    ) -> None:
        super().__init__(retention=retention, clock=clock, emit=emit)
        self.path = Path(path)
        self.table = table
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = self._connect()
            self._reader = self._connect()
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailableError(
                f"Cannot open SQLite store {str(self.path)!r}: {exc}. Check that the directory "
                "exists and is writable, or choose another path."
            ) from exc
        self._wlock, self._rlock = threading.RLock(), threading.RLock()
        with self._write() as tx:
            for statement in schema("BLOB", "REAL"):
                tx.count(statement)

    @property
    def url(self) -> str:
        """The URL that reopens this store (with its table)."""
        return f"sqlite:///{self.path.absolute()}?table={self.table}"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        with self._wlock:
            self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._writer, self.table)
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise
            self._writer.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        with self._rlock:
            self._reader.execute("BEGIN")
            try:
                yield _SqliteTx(self._reader, self.table)
            finally:
                self._reader.execute("COMMIT")

    def _lock_scope(self, tx: Tx, scope_key: str) -> None:
        return None  # BEGIN IMMEDIATE already holds the database's single write lock

    def close(self) -> None:
        """Close both connections."""
        self._writer.close()
        self._reader.close()
