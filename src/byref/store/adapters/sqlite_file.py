"""One SQLite file opened for byref's SQL adapters (the artifact store and conversation state).

Owns the connection settings (WAL journal, synchronous=NORMAL: a commit is durable against a
process crash, and against power loss up to the last checkpoint; a busy timeout so several
processes may share the file), the two connections each adapter keeps: a writer (BEGIN
IMMEDIATE, so a check and its write are one step across processes) and a reader (snapshots that
do not wait for the writer), and giving space back. SQLite keeps the pages a delete frees on its
freelist for reuse and never shrinks the file by itself; the file is made with
`auto_vacuum=INCREMENTAL` (a file made before is converted once, by a `VACUUM` when it is
opened), and after a write leaves more than `SLACK_PAGES` free, at most `STEP_PAGES` of them are
returned to the filesystem (`PRAGMA incremental_vacuum`), so the work a write adds stays bounded
and a delete-heavy workload converges to `SLACK_PAGES` free pages (reclaiming is best effort: a
busy file is tried again after the next write).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

BUSY_TIMEOUT_MS = 60_000
INCREMENTAL = 2
"""`PRAGMA auto_vacuum`'s value for INCREMENTAL."""
SLACK_PAGES = 1024
"""Free pages kept for the next writes to reuse (4 MiB at SQLite's default page size)."""
STEP_PAGES = 1024
"""At most this many free pages are returned to the filesystem after one write."""
T = TypeVar("T")


def connect(path: Path, *, reclaim: bool = True) -> sqlite3.Connection:
    """A connection to `path` in autocommit mode (transactions are explicit), WAL, shared; a
    file it creates gives space back incrementally (unless `reclaim` is False)."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                           check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if reclaim:  # before the journal mode: that write makes the file, then only VACUUM can
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class SqliteFile(Generic[T]):
    """A writer and a reader connection to `path`; `write()` and `read()` yield `tx(conn)` inside
    one transaction. Raises `OSError` or `sqlite3.Error` when the file cannot be opened.
    `reclaim=False` leaves the file as SQLite alone would (no auto-vacuum, space never given
    back): the benchmark's baseline."""

    def __init__(self, path: Path, tx: Callable[[sqlite3.Connection], T], *,
                 reentrant: bool = False, reclaim: bool = True) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._tx = tx
        self._reclaim = reclaim
        self._writer = connect(path, reclaim=reclaim)
        try:
            if reclaim:
                migrate(self._writer)
            self._reader = connect(path, reclaim=reclaim)
        except BaseException:
            self._writer.close()
            raise
        lock = threading.RLock if reentrant else threading.Lock
        self._wlock, self._rlock = lock(), lock()
        self._depth = 0

    @contextmanager
    def write(self) -> Iterator[T]:
        """One write transaction (BEGIN IMMEDIATE), rolled back if the block raises."""
        with self._wlock:
            self._depth += 1
            try:
                self._writer.execute("BEGIN IMMEDIATE")
                try:
                    yield self._tx(self._writer)
                except BaseException:
                    self._writer.execute("ROLLBACK")
                    raise
                self._writer.execute("COMMIT")
            finally:
                self._depth -= 1
            if not self._depth and self._reclaim:
                give_back(self._writer)

    @contextmanager
    def read(self) -> Iterator[T]:
        """One read snapshot."""
        with self._rlock:
            self._reader.execute("BEGIN")
            try:
                yield self._tx(self._reader)
            finally:
                self._reader.execute("COMMIT")

    def space(self) -> dict[str, int]:
        """The file's free pages (held, not given back), page size and size on disk once the
        write-ahead log is checkpointed into it."""
        with self._wlock:
            conn = self._writer
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            return {"free_pages": int(conn.execute("PRAGMA freelist_count").fetchone()[0]),
                    "page_size": int(conn.execute("PRAGMA page_size").fetchone()[0]),
                    "file_bytes": self.path.stat().st_size}

    def close(self) -> None:
        """Close both connections (after any transaction in progress)."""
        with self._wlock, self._rlock:
            self._writer.close()
            self._reader.close()


def migrate(conn: sqlite3.Connection) -> bool:
    """Convert a file made without incremental auto-vacuum (one `VACUUM`: it rewrites the file,
    so it needs as much free disk as the file holds, once); whether the file now gives space
    back. A file another process keeps busy past the timeout, or a disk too full to rewrite it,
    is left as it was and converted on a later open: the store still opens."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        return True
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    except sqlite3.OperationalError:
        return False
    return True


def give_back(conn: sqlite3.Connection, *, slack: int = SLACK_PAGES,
              step: int = STEP_PAGES) -> int:
    """Return up to `step` free pages beyond `slack` to the filesystem; how many were asked
    for. Outside any transaction; a busy or failing file loses only this round."""
    try:
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
        pages = min(free - slack, step)
        if pages <= 0:
            return 0
        # executescript steps the pragma to completion (one execute() frees a single page).
        conn.executescript(f"PRAGMA incremental_vacuum({pages});")
        return pages
    except sqlite3.Error:
        return 0
