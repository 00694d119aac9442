"""The SQLite adapter (`sqlite:///relative.db`, `sqlite:////absolute.db`): one server, one file.

Owns opening the database (WAL journal, a busy timeout so several processes may share the file,
space given back after deletes: `sqlite_file`) and the two connections the shared SQL engine
runs on: a writer (BEGIN IMMEDIATE, so retention in a scope is serialized across processes) and a
reader (snapshots that do not wait for writers).
The law is the engine's: a put is one transaction, so nothing partial is ever visible.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from byref.events import Emitter
from byref.store.adapters._sql import SqlStore, Tx, schema
from byref.store.adapters.sqlite_file import SqliteFile
from byref.store.port import StoreUnavailableError
from byref.store.retention import Retention


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
        reclaim: bool = True,
    ) -> None:
        super().__init__(retention=retention, clock=clock, emit=emit)
        self.path = Path(path)
        self.table = table
        try:
            self._db = SqliteFile(self.path, lambda conn: _SqliteTx(conn, table), reentrant=True,
                                  reclaim=reclaim)
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailableError(
                f"Cannot open SQLite store {str(self.path)!r}: {exc}. Check that the directory "
                "exists and is writable, or choose another path."
            ) from exc
        with self._write() as tx:
            for statement in schema("BLOB", "REAL"):
                tx.count(statement)

    @property
    def url(self) -> str:
        """The URL that reopens this store (with its table)."""
        return f"sqlite:///{self.path.absolute()}?table={self.table}"

    def _write(self) -> AbstractContextManager[Tx]:
        return self._db.write()

    def _read(self) -> AbstractContextManager[Tx]:
        return self._db.read()

    def _lock_scope(self, tx: Tx, scope_key: str) -> None:
        return None  # BEGIN IMMEDIATE already holds the database's single write lock

    def space(self) -> dict[str, int]:
        """Free pages, page size and file size on disk (`SqliteFile.space`)."""
        return self._db.space()

    def close(self) -> None:
        """Close both connections."""
        self._db.close()
