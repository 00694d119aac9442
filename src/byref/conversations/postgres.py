"""Conversations in PostgreSQL (`postgresql://user@host:5432/db?table=byref`): shared by replicas.

Owns connecting with psycopg 3 (the `byref[postgres]` extra, imported only here), creating the
tables once under an advisory lock, and the two connections: a writer whose append is one
transaction (its conditional update row-locks the conversation, so replicas continuing one record
are serialized and the loser gets `SeqConflict`) and whose numbered append is one statement, and
an autocommit reader whose reads are each one statement (one snapshot, one round trip). Every call
is a network round trip (`remote`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from byref.conversations._sql import SqlConversations, Tx, schema
from byref.conversations._sql_tasks import SqlTasks, tasks_schema, tasks_upgrade
from byref.conversations.port import (
    DEFAULT_TTL,
    ConversationBusy,
    ConversationError,
    SeqConflict,
    busy_text,
)
from byref.conversations.tasks import TaskRecords
from byref.store import Scope
from byref.store.adapters.pg import PgTx, first_line, import_psycopg, redact

if TYPE_CHECKING:
    pass

_SCHEMA_LOCK = 0x62797263  # "byrc": one advisory key for creating the conversation tables


class PostgresConversations(SqlConversations):
    """Conversation state in a PostgreSQL table: durable, shared by every process that opens the
    same table (replicas)."""

    remote = True

    def __init__(self, conninfo: str, *, table: str = "byref", ttl: float | None = DEFAULT_TTL,
                 clock: Callable[[], float] | None = None, connect_timeout: float = 10.0) -> None:
        super().__init__(ttl=ttl, clock=clock)
        pg = import_psycopg(ConversationError, "PostgreSQL conversation state")
        self.conninfo, self.table = conninfo, table
        self._tables = {"conv": f"{table}_conversations", "lines": f"{table}_lines",
                        "usage": f"{table}_usage", "tasks": f"{table}_tasks",
                        "lock": " FOR UPDATE"}
        timeout = max(1, int(connect_timeout))
        try:
            # Autocommit: `_write` opens an explicit transaction; a numbered append is one
            # statement, its own transaction (one round trip).
            self._writer = pg.connect(conninfo, autocommit=True, connect_timeout=timeout)
            self._reader = pg.connect(conninfo, autocommit=True, connect_timeout=timeout)
        except pg.Error as exc:
            raise ConversationError(
                f"Cannot reach PostgreSQL at {redact(conninfo)!r} for conversation state: "
                f"{first_line(exc)}. Start the "
                "server, or fix the state URL.") from exc
        self._wlock, self._rlock = threading.Lock(), threading.Lock()
        with self._write() as tx:
            tx.rows("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
            for statement in [*schema("BYTEA", "DOUBLE PRECISION"),
                              *tasks_schema("DOUBLE PRECISION")]:
                tx.count(statement)
            columns = {str(r[0]) for r in tx.rows(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?",
                (self._tables["tasks"],))}
            for statement in tasks_upgrade(columns):
                tx.count(statement)
        self.tasks: TaskRecords = SqlTasks(self._write, self._read, self.clock)

    @property
    def url(self) -> str:
        """The state URL that opens this table again (the conninfo, as given, with `table=`)."""
        sep = "&" if "?" in self.conninfo else "?"
        return f"{self.conninfo}{sep}table={self.table}"

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        with self._wlock, self._writer.transaction(), self._writer.cursor(binary=True) as cur:
            yield PgTx(cur, self._tables)

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        # Every read is one statement (its own snapshot): no BEGIN/COMMIT round trips.
        with self._rlock, self._reader.cursor(binary=True) as cur:
            yield PgTx(cur, self._tables)

    def append_numbered(self, scope: Scope, head: bytes, tail: bytes) -> int:
        """See `ConversationState.append_numbered`: one statement, so the conversation row is
        locked only while PostgreSQL runs it (not across round trips), and writers of one
        record queue on it for microseconds."""
        key, now = scope.key(), self.clock()
        with self._wlock, self._writer.cursor(binary=True) as cur:
            got = PgTx(cur, self._tables).rows(
                "WITH c AS (UPDATE {conv} SET length = length + 1, expires_at = ? WHERE "
                "scope_key = ? AND live = 1 AND (expires_at IS NULL OR expires_at > ?) "
                "RETURNING origin + length - 1 AS seq) INSERT INTO {lines} (scope_key, seq, "
                "line) SELECT ?, seq, ?::bytea || convert_to(seq::text, 'UTF8') || ?::bytea "
                "FROM c RETURNING seq", (self._expires(now), key, now, key, head, tail))
        if not got:
            raise SeqConflict(f"Conversation {str(scope)!r} is not open (it expired or was "
                              "deleted); open it again to start a new record.")
        return int(got[0][0])

    def drop_tables(self) -> None:
        """Remove this state's four tables (test and benchmark clean-up)."""
        with self._write() as tx:
            for name in ("{conv}", "{lines}", "{usage}", "{tasks}"):
                tx.count(f"DROP TABLE IF EXISTS {name}")

    def hold(self, scope: Scope) -> _PgHold:
        """See `ConversationState.hold`: a session advisory lock on the table and scope, on a
        connection of its own (PostgreSQL drops it when that connection ends, with the
        process)."""
        pg = import_psycopg(ConversationError, "PostgreSQL conversation state")
        digest = hashlib.sha256(f"{self.table}\0{scope.key()}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        try:
            conn = pg.connect(self.conninfo, autocommit=True, application_name="byref-hold")
        except pg.Error as exc:
            raise ConversationError(f"Cannot hold conversation {str(scope)!r} in PostgreSQL: "
                                    f"{str(exc).strip() or exc!r}") from exc
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except BaseException:
            conn.close()
            raise
        if not (row and row[0]):
            conn.close()
            raise ConversationBusy(busy_text(scope))
        return _PgHold(conn)

    def close(self) -> None:
        """Close both connections."""
        with self._wlock, self._rlock:
            self._writer.close()
            self._reader.close()


class _PgHold:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def release(self) -> None:
        if not self._conn.closed:
            self._conn.close()  # a session advisory lock ends with its connection

