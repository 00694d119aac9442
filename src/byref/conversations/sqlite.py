"""Conversations in a SQLite file (`sqlite:///state.db`): the embedded default beside a file store.

Owns the conversation tables in that file; the connections (WAL, busy timeout, a writer with
BEGIN IMMEDIATE so an append's check and write are one step across processes, a reader that does
not wait for it) are `byref.store.adapters.sqlite_file.SqliteFile`, shared with the SQLite
artifact store.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from byref.conversations._sql import SqlConversations, Tx, schema
from byref.conversations._sql_tasks import SqlTasks, tasks_schema, tasks_upgrade
from byref.conversations.port import (
    DEFAULT_TTL,
    ConversationBusy,
    ConversationError,
    busy_text,
)
from byref.conversations.tasks import TaskRecords
from byref.store import Scope
from byref.store.adapters.sqlite_file import SqliteFile


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection, prefix: str) -> None:
        self._conn, self._prefix = conn, prefix

    def _sql(self, sql: str) -> str:
        return sql.replace("{conv}", f"{self._prefix}_conversations").replace(
            "{lines}", f"{self._prefix}_lines").replace(
            "{usage}", f"{self._prefix}_usage").replace(
            "{tasks}", f"{self._prefix}_tasks").replace("{lock}", "")

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
            self._db = SqliteFile(self.path, lambda conn: _SqliteTx(conn, table))
        except (OSError, sqlite3.Error) as exc:
            raise ConversationError(
                f"Cannot open the conversation state {str(self.path)!r}: {exc}. Check that the "
                "directory exists and is writable, or choose another state URL.") from exc
        with self._write() as tx:
            for statement in [*schema("BLOB", "REAL"), *tasks_schema("REAL")]:
                tx.count(statement)
            columns = {str(r[1]) for r in tx.rows("PRAGMA table_info({tasks})")}
            for statement in tasks_upgrade(columns):
                tx.count(statement)
        self.tasks: TaskRecords = SqlTasks(self._write, self._read, self.clock)

    @property
    def url(self) -> str:
        """The state URL that opens this file and table again."""
        return f"sqlite:///{self.path.absolute()}?table={self.table}"

    def _write(self) -> AbstractContextManager[Tx]:
        return self._db.write()

    def _read(self) -> AbstractContextManager[Tx]:
        return self._db.read()

    def hold(self, scope: Scope) -> _FileHold:
        """See `ConversationState.hold`: an exclusive `flock` on a file beside the database
        (`<db>.holds/<table>-<hash of the scope>`), which the kernel drops with the process."""
        folder = Path(f"{self.path}.holds")
        folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(scope.key().encode()).hexdigest()[:32]
        fd = os.open(folder / f"{self.table}-{digest}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConversationBusy(busy_text(scope)) from None
        except BaseException:
            os.close(fd)
            raise
        return _FileHold(fd)

    def close(self) -> None:
        """Close both connections."""
        self._db.close()


class _FileHold:
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None
