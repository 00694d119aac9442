"""The shared engine of the two SQL implementations (SQLite, PostgreSQL): one schema, one set of
statements.

Owns the tables — `<prefix>_conversations` (one row per scope: origin, length, expiry, working
set, the expired range), `<prefix>_lines` (one row per message line, keyed by scope and seq) and
`<prefix>_usage` — and the port's verbs over them. The law: an append is one transaction whose
first statement is a conditional update of the conversation row (live, unexpired, continuing at
exactly the batch's first seq), so two writers cannot both continue one record and a crash
commits all of a batch or none of it.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from byref.conversations.port import Conversation, SeqConflict
from byref.store import Scope


class Tx(Protocol):
    """Statements in one transaction; `?` placeholders, `{conv}` `{lines}` `{usage}` tables."""

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    def count(self, sql: str, params: Sequence[Any] = ()) -> int: ...


def schema(blob: str, real: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS {conv} (scope_key TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
        "principal TEXT NOT NULL, conversation TEXT NOT NULL, origin BIGINT NOT NULL, "
        f"length BIGINT NOT NULL, live INTEGER NOT NULL, expires_at {real}, "
        "working_set TEXT NOT NULL, usage_count BIGINT NOT NULL, expired_first BIGINT, "
        "expired_last BIGINT)",
        "CREATE INDEX IF NOT EXISTS {conv}_by_expiry ON {conv} (live, expires_at)",
        f"CREATE TABLE IF NOT EXISTS {{lines}} (scope_key TEXT NOT NULL, seq BIGINT NOT NULL, "
        f"line {blob} NOT NULL, PRIMARY KEY (scope_key, seq))",
        "CREATE TABLE IF NOT EXISTS {usage} (scope_key TEXT NOT NULL, n BIGINT NOT NULL, "
        "query TEXT NOT NULL, tool TEXT NOT NULL, PRIMARY KEY (scope_key, n))",
    ]


ROWS_A_STATEMENT = 200


def _insert(tx: Tx, head: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """Rows as multi-row INSERTs: one statement (one round trip) for a call's few lines, where
    a prepared statement run per row costs PostgreSQL several times as much."""
    for at in range(0, len(rows), ROWS_A_STATEMENT):
        chunk = rows[at:at + ROWS_A_STATEMENT]
        marks = "(" + ", ".join("?" * len(chunk[0])) + ")"
        tx.count(head + ", ".join([marks] * len(chunk)), [v for row in chunk for v in row])


_COLUMNS = ("origin, length, live, expires_at, working_set, usage_count, expired_first, "
            "expired_last")


class SqlConversations(ABC):
    """The verbs, written once; subclasses supply transactions."""

    remote = False
    durable = True

    def __init__(self, *, ttl: float | None, clock: Callable[[], float] | None) -> None:
        self.ttl = ttl
        self.clock = clock or time.time

    @abstractmethod
    def _write(self) -> AbstractContextManager[Tx]: ...

    @abstractmethod
    def _read(self) -> AbstractContextManager[Tx]: ...

    def _expires(self, now: float) -> float | None:
        return None if self.ttl is None else now + self.ttl

    def _row(self, scope: Scope, row: tuple[Any, ...]) -> Conversation:
        origin, length, _live, expires, ws, usage, first, last = row
        return Conversation(
            scope, int(origin), int(length), None if expires is None else float(expires),
            tuple(json.loads(ws)), int(usage),
            None if first is None else (int(first), int(last)))

    def open(self, scope: Scope, origin: int) -> Conversation:
        key, now = scope.key(), self.clock()
        with self._write() as tx:
            # Insert-if-absent first, so two replicas opening one scope never race on the key.
            tx.count("INSERT INTO {conv} (scope_key, tenant, principal, conversation, origin, "
                     "length, live, expires_at, working_set, usage_count) VALUES "
                     "(?, ?, ?, ?, ?, 0, 1, ?, '[]', 0) ON CONFLICT (scope_key) DO NOTHING",
                     (key, scope.tenant, scope.principal, scope.conversation, origin,
                      self._expires(now)))
            row = tx.rows(f"SELECT {_COLUMNS} FROM {{conv}} WHERE scope_key = ?{{lock}}",
                          (key,))[0]
            live = bool(row[2]) and (row[3] is None or float(row[3]) > now)
            if live:
                tx.count("UPDATE {conv} SET expires_at = ? WHERE scope_key = ?",
                         (self._expires(now), key))
                return self._row(scope, (*row[:3], self._expires(now), *row[4:]))
            self._expire(tx, key, row)
            first, last = self._expired_range(row)
            start = origin if last is None else max(origin, last + 1)
            tx.count("UPDATE {conv} SET origin = ?, length = 0, live = 1, expires_at = ?, "
                     "working_set = '[]', usage_count = 0, expired_first = ?, "
                     "expired_last = ? WHERE scope_key = ?",
                     (start, self._expires(now), first, last, key))
            return Conversation(scope, start, 0, self._expires(now), (), 0,
                                None if first is None or last is None else (first, last))

    @staticmethod
    def _expired_range(row: tuple[Any, ...]) -> tuple[int | None, int | None]:
        origin, length, live, _e, _w, _u, first, last = row
        if live and length:  # expiring now: its range joins any earlier expired one
            return (int(first) if first is not None else int(origin)), int(origin) + int(
                length) - 1
        return (None if first is None else int(first)), (None if last is None else int(last))

    def _expire(self, tx: Tx, key: str, row: tuple[Any, ...]) -> None:
        if not row[2]:
            return
        first, last = self._expired_range(row)
        tx.count("DELETE FROM {lines} WHERE scope_key = ?", (key,))
        tx.count("DELETE FROM {usage} WHERE scope_key = ?", (key,))
        tx.count("UPDATE {conv} SET live = 0, length = 0, working_set = '[]', usage_count = 0, "
                 "expired_first = ?, expired_last = ? WHERE scope_key = ?", (first, last, key))

    def find(self, scope: Scope) -> Conversation | None:
        with self._read() as tx:
            found = tx.rows(f"SELECT {_COLUMNS} FROM {{conv}} WHERE scope_key = ?",
                            (scope.key(),))
        if not found:
            return None
        row = found[0]
        if not row[2] or (row[3] is not None and float(row[3]) <= self.clock()):
            return None
        return self._row(scope, row)

    def conversations(self, tenant: str | None = None,
                      principal: str | None = None) -> list[Conversation]:
        where = ["live = 1", "(expires_at IS NULL OR expires_at > ?)"]
        params: list[Any] = [self.clock()]
        for column, value in (("tenant", tenant), ("principal", principal)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        with self._read() as tx:
            rows = tx.rows(f"SELECT tenant, principal, conversation, {_COLUMNS} FROM {{conv}} "
                           f"WHERE {' AND '.join(where)}", params)
        found = [self._row(Scope(r[0], r[1], r[2]), r[3:]) for r in rows]
        return sorted(found, key=lambda c: (c.scope.tenant, c.scope.principal,
                                            c.scope.conversation))

    def append(self, scope: Scope, first_seq: int, lines: Sequence[bytes], *,
               working_set: Sequence[str] | None = None,
               usage: Sequence[tuple[str, str]] = ()) -> None:
        key, now = scope.key(), self.clock()
        ws = None if working_set is None else json.dumps(list(working_set), ensure_ascii=False)
        with self._write() as tx:
            # The condition is the law: live, unexpired, continuing at exactly first_seq.
            got = tx.rows(
                "UPDATE {conv} SET length = length + ?, expires_at = ?, "
                "working_set = COALESCE(?, working_set), usage_count = usage_count + ? "
                "WHERE scope_key = ? AND live = 1 AND origin + length = ? AND "
                "(expires_at IS NULL OR expires_at > ?) RETURNING usage_count",
                (len(lines), self._expires(now), ws, len(usage), key, first_seq, now))
            if not got:
                raise SeqConflict(self._why(tx, scope, first_seq, now))
            _insert(tx, "INSERT INTO {lines} (scope_key, seq, line) VALUES ",
                    [(key, first_seq + i, bytes(line)) for i, line in enumerate(lines)])
            start = int(got[0][0]) - len(usage)
            _insert(tx, "INSERT INTO {usage} (scope_key, n, query, tool) VALUES ",
                    [(key, start + i, q, t) for i, (q, t) in enumerate(usage)])

    def append_numbered(self, scope: Scope, head: bytes, tail: bytes) -> int:
        key, now = scope.key(), self.clock()
        with self._write() as tx:
            # The conversation row's lock (held to the commit) serializes numbering writers.
            got = tx.rows(
                "UPDATE {conv} SET length = length + 1, expires_at = ? WHERE scope_key = ? AND "
                "live = 1 AND (expires_at IS NULL OR expires_at > ?) RETURNING origin + length - 1",
                (self._expires(now), key, now))
            if not got:
                raise SeqConflict(_not_open(scope))
            seq = int(got[0][0])
            _insert(tx, "INSERT INTO {lines} (scope_key, seq, line) VALUES ",
                    [(key, seq, head + str(seq).encode() + tail)])
        return seq

    def save(self, scope: Scope, *, working_set: Sequence[str] | None = None,
             usage: Sequence[tuple[str, str]] = ()) -> None:
        key, now = scope.key(), self.clock()
        ws = None if working_set is None else json.dumps(list(working_set), ensure_ascii=False)
        with self._write() as tx:
            got = tx.rows(
                "UPDATE {conv} SET expires_at = ?, working_set = COALESCE(?, working_set), "
                "usage_count = usage_count + ? WHERE scope_key = ? AND live = 1 AND "
                "(expires_at IS NULL OR expires_at > ?) RETURNING usage_count",
                (self._expires(now), ws, len(usage), key, now))
            if not got:
                raise SeqConflict(_not_open(scope))
            start = int(got[0][0]) - len(usage)
            _insert(tx, "INSERT INTO {usage} (scope_key, n, query, tool) VALUES ",
                    [(key, start + i, q, t) for i, (q, t) in enumerate(usage)])

    def _why(self, tx: Tx, scope: Scope, first_seq: int, now: float) -> str:
        found = tx.rows("SELECT origin, length, live, expires_at FROM {conv} WHERE scope_key = ?",
                        (scope.key(),))
        if not found or not found[0][2] or (found[0][3] is not None and found[0][3] <= now):
            return _not_open(scope)
        at = int(found[0][0]) + int(found[0][1])
        return (f"Conversation {str(scope)!r} continues at seq {at}, not {first_seq}; another "
                "writer appended first. Nothing was written.")

    def lines(self, scope: Scope, first_seq: int, count: int) -> list[bytes]:
        if count <= 0:
            return []
        # One statement (one snapshot, one round trip): the run from first_seq of a live
        # record that holds first_seq, or nothing.
        with self._read() as tx:
            rows = tx.rows(
                "SELECT l.line FROM {lines} l JOIN {conv} c ON c.scope_key = l.scope_key "
                "WHERE l.scope_key = ? AND c.live = 1 AND (c.expires_at IS NULL OR "
                "c.expires_at > ?) AND c.origin <= ? AND l.seq >= ? AND l.seq < ? ORDER BY l.seq",
                (scope.key(), self.clock(), first_seq, first_seq, first_seq + count))
        return [bytes(r[0]) for r in rows]

    def usage(self, scope: Scope) -> list[tuple[str, str]]:
        with self._read() as tx:
            rows = tx.rows(
                "SELECT u.query, u.tool FROM {usage} u JOIN {conv} c ON c.scope_key = "
                "u.scope_key WHERE u.scope_key = ? AND c.live = 1 AND (c.expires_at IS NULL OR "
                "c.expires_at > ?) ORDER BY u.n", (scope.key(), self.clock()))
        return [(str(q), str(t)) for q, t in rows]

    def delete(self, scope: Scope) -> bool:
        key = scope.key()
        with self._write() as tx:
            tx.count("DELETE FROM {lines} WHERE scope_key = ?", (key,))
            tx.count("DELETE FROM {usage} WHERE scope_key = ?", (key,))
            return tx.count("DELETE FROM {conv} WHERE scope_key = ?", (key,)) > 0

    def sweep(self) -> int:
        now = self.clock()
        with self._write() as tx:
            due = tx.rows(f"SELECT scope_key, {_COLUMNS} FROM {{conv}} WHERE live = 1 AND "
                          "expires_at IS NOT NULL AND expires_at <= ?{lock}", (now,))
            for row in due:
                self._expire(tx, str(row[0]), tuple(row[1:]))
        return len(due)

    @abstractmethod
    def close(self) -> None: ...


def _not_open(scope: Scope) -> str:
    return (f"Conversation {str(scope)!r} is not open (it expired or was deleted); open it "
            "again to start a new record.")
