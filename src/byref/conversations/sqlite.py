"""Conversations in a SQLite file (`sqlite:///state.db`): the embedded default beside a file store.

Owns opening the database (WAL journal, synchronous=NORMAL: a commit is durable against a process
crash, and against power loss up to the last checkpoint; a busy timeout so several processes may
share the file) and its two connections: a writer (BEGIN IMMEDIATE, so an append's check and
write are one step across processes) and a reader (snapshots that do not wait for the writer).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from byref.conversations._sql import SqlConversations, Tx, schema
from byref.conversations.port import DEFAULT_TTL, ConversationError

BUSY_TIMEOUT_MS = 60_000


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection, prefix: str) -> None:
        self._conn, self._prefix = conn, prefix

    def _sql(self, sql: str) -> str:
        return sql.replace("{conv}", f"{self._prefix}_conversations").replace(
            "{lines}", f"{self._prefix}_lines").replace(
            "{usage}", f"{self._prefix}_usage").replace("{lock}", "")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(self._sql(sql), tuple(params)).fetchall()

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(self._sql(sql), tuple(params)).rowcount



class SqliteConversations(SqlConversations):
    """Conversation state in a SQLite file: durable, shared by processes on this machine that open
    the same file and table."""

    def __init__(self, path: str | Path, *, table: str = "byref",
                 ttl: float | None = DEFAULT_TTL,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__(ttl=ttl, clock=clock)
        self.path = Path(path)
        self.table = table
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = self._connect()
            self._reader = self._connect()
        except (OSError, sqlite3.Error) as exc:
            raise ConversationError(
                f"Cannot open the conversation state {str(self.path)!r}: {exc}. Check that the "
                "directory exists and is writable, or choose another state URL.") from exc
        self._wlock, self._rlock = threading.Lock(), threading.Lock()
        with self._write() as tx:
            for statement in schema("BLOB", "REAL"):
                tx.count(statement)

    @property
    def url(self) -> str:
        """The state URL that opens this file and table again."""
        return f"sqlite:///{self.path.absolute()}?table={self.table}"

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
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

    def close(self) -> None:
        """Close both connections."""
        with self._wlock, self._rlock:
            self._writer.close()
            self._reader.close()
