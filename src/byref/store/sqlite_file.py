"""One SQLite file opened for byref's SQL adapters (the artifact store and conversation state).

Owns the connection settings (WAL journal, synchronous=NORMAL: a commit is durable against a
process crash, and against power loss up to the last checkpoint; a busy timeout so several
processes may share the file) and the two connections each adapter keeps: a writer (BEGIN
IMMEDIATE, so a check and its write are one step across processes) and a reader (snapshots that
do not wait for the writer).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

BUSY_TIMEOUT_MS = 60_000
T = TypeVar("T")


def connect(path: Path) -> sqlite3.Connection:
    """A connection to `path` in autocommit mode (transactions are explicit), WAL, shared."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class SqliteFile(Generic[T]):
    """A writer and a reader connection to `path`; `write()` and `read()` yield `tx(conn)` inside
    one transaction. Raises `OSError` or `sqlite3.Error` when the file cannot be opened."""

    def __init__(self, path: Path, tx: Callable[[sqlite3.Connection], T], *,
                 reentrant: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._tx = tx
        self._writer = connect(path)
        self._reader = connect(path)
        lock = threading.RLock if reentrant else threading.Lock
        self._wlock, self._rlock = lock(), lock()

    @contextmanager
    def write(self) -> Iterator[T]:
        """One write transaction (BEGIN IMMEDIATE), rolled back if the block raises."""
        with self._wlock:
            self._writer.execute("BEGIN IMMEDIATE")
            try:
                yield self._tx(self._writer)
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise
            self._writer.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[T]:
        """One read snapshot."""
        with self._rlock:
            self._reader.execute("BEGIN")
            try:
                yield self._tx(self._reader)
            finally:
                self._reader.execute("COMMIT")

    def close(self) -> None:
        """Close both connections (after any transaction in progress)."""
        with self._wlock, self._rlock:
            self._writer.close()
            self._reader.close()
