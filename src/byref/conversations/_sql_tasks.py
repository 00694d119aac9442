"""Task records in the SQL state (SQLite, PostgreSQL): one table, `<prefix>_tasks`, beside the
conversations, so every process sharing the state reads the same record.

Owns the table and the `TaskRecords` verbs over it. The law (`tasks`): a terminal status is set
by one conditional update (`status IN running`), so a finish and a cancel racing on two
replicas leave exactly one of them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from byref.conversations._sql import Tx
from byref.conversations.tasks import RUNNING, TaskRecord, answered

_COLUMNS = ("task_id, owner, status, created_at, updated_at, ttl_ms, poll_ms, runner, beat_at, "
            "result, error, message, inputs, responses")
_RUNNING = "status IN ('working', 'input_required')"
assert RUNNING == ("working", "input_required")


def tasks_schema(real: str) -> list[str]:
    """The task table's statements (`real`: the engine's float type)."""
    return [
        "CREATE TABLE IF NOT EXISTS {tasks} (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
        f"status TEXT NOT NULL, created_at {real} NOT NULL, updated_at {real} NOT NULL, "
        f"ttl_ms BIGINT NOT NULL, poll_ms BIGINT NOT NULL, runner TEXT NOT NULL, "
        f"beat_at {real} NOT NULL, result TEXT, error TEXT, message TEXT, inputs TEXT, "
        "responses TEXT)",
        "CREATE INDEX IF NOT EXISTS {tasks}_by_runner ON {tasks} (runner)",
    ]


ADDED = ("inputs", "responses")
"""Columns added since the table's first release: a table without them gains them."""


def tasks_upgrade(existing: set[str]) -> list[str]:
    """What brings a task table with `existing` columns up to date (nothing for a new one)."""
    return [f"ALTER TABLE {{tasks}} ADD COLUMN {column} TEXT" for column in ADDED
            if existing and column not in existing]


class SqlTasks:
    """`TaskRecords` over a SQL state's transactions."""

    def __init__(self, write: Callable[[], AbstractContextManager[Tx]],
                 read: Callable[[], AbstractContextManager[Tx]],
                 clock: Callable[[], float] | None = None) -> None:
        self._write, self._read = write, read
        self.clock = clock or time.time

    def create(self, record: TaskRecord) -> None:
        """See `TaskRecords.create`."""
        r = record
        with self._write() as tx:
            tx.count(f"INSERT INTO {{tasks}} ({_COLUMNS}) VALUES "
                     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (r.task_id, r.owner, r.status, r.created_at, r.updated_at, r.ttl_ms,
                      r.poll_ms, r.runner, r.beat_at, r.result, r.error, r.message, r.inputs,
                      r.responses))

    def get(self, task_id: str, owner: str) -> TaskRecord | None:
        """See `TaskRecords.get`."""
        with self._read() as tx:
            rows = tx.rows(f"SELECT {_COLUMNS} FROM {{tasks}} WHERE task_id = ? AND owner = ?",
                           (task_id, owner))
        if not rows:
            return None
        found = _record(rows[0])
        return None if found.expired(self.clock()) else found

    def finish(self, task_id: str, status: str, *, result: str | None = None,
               error: str | None = None, message: str | None = None) -> bool:
        """See `TaskRecords.finish`."""
        with self._write() as tx:
            return tx.count(
                "UPDATE {tasks} SET status = ?, updated_at = ?, result = ?, error = ?, "
                f"message = ? WHERE task_id = ? AND {_RUNNING}",
                (status, self.clock(), result, error, message, task_id)) > 0

    def beat(self, runner: str) -> list[str]:
        """See `TaskRecords.beat`."""
        with self._write() as tx:
            tx.count(f"UPDATE {{tasks}} SET beat_at = ? WHERE runner = ? AND {_RUNNING}",
                     (self.clock(), runner))
            rows = tx.rows(f"SELECT task_id FROM {{tasks}} WHERE runner = ? AND NOT {_RUNNING}",
                           (runner,))
        return [str(r[0]) for r in rows]

    def sweep(self) -> int:
        """See `TaskRecords.sweep`."""
        with self._write() as tx:
            return tx.count("DELETE FROM {tasks} WHERE created_at + ttl_ms / 1000.0 < ?",
                            (self.clock(),))


    def ask(self, task_id: str, inputs: str | None) -> bool:
        """See `TaskRecords.ask`."""
        with self._write() as tx:
            return tx.count(
                f"UPDATE {{tasks}} SET status = ?, inputs = ?, updated_at = ? "
                f"WHERE task_id = ? AND {_RUNNING}",
                ("input_required" if inputs else "working", inputs, self.clock(), task_id)) > 0

    def respond(self, task_id: str, owner: str, responses: dict[str, Any]) -> bool:
        """See `TaskRecords.respond`: read and written in one transaction (the row locked)."""
        with self._write() as tx:
            rows = tx.rows(f"SELECT {_COLUMNS} FROM {{tasks}} WHERE task_id = ? AND owner = ?"
                           "{lock}", (task_id, owner))
            after = answered(_record(rows[0]), responses) if rows else None
            if after is None:
                return False
            inputs, kept, asking = after
            tx.count("UPDATE {tasks} SET status = ?, inputs = ?, responses = ?, updated_at = ? "
                     "WHERE task_id = ?", ("input_required" if asking else "working", inputs,
                                           kept, self.clock(), task_id))
            return True

    def take(self, task_id: str) -> dict[str, Any]:
        """See `TaskRecords.take`."""
        with self._write() as tx:
            rows = tx.rows("SELECT responses FROM {tasks} WHERE task_id = ?{lock}", (task_id,))
            if not rows or rows[0][0] is None:
                return {}
            tx.count("UPDATE {tasks} SET responses = NULL WHERE task_id = ?", (task_id,))
        taken: dict[str, Any] = json.loads(rows[0][0])
        return taken


def _record(row: tuple[Any, ...]) -> TaskRecord:
    (task_id, owner, status, created, updated, ttl_ms, poll_ms, runner, beat, result, error,
     message, inputs, responses) = row
    return TaskRecord(str(task_id), str(owner), str(status), float(created), float(updated),
                      int(ttl_ms), int(poll_ms), str(runner), float(beat), result, error, message,
                      inputs, responses)
