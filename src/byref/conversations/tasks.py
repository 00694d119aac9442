"""Task records: the durable half of an MCP task (`io.modelcontextprotocol/tasks`), kept beside
the conversations so any process sharing the state reads it.

Owns `TaskRecord` and the `TaskRecords` port, with its memory implementation (the SQL one is
`_sql_tasks`). The law: a record is found only by its id *and* its owner (another owner's id
reads as absent); a terminal status (`completed`, `failed`, `cancelled`) is final — `finish` and
`cancel` change only a record still running, so whichever comes first wins; a record outlives
its `ttl_ms` from creation and no longer; the process running a record beats (`beat`) so a
reader can tell a record whose runner died. A task waiting on its client (`input_required`) keeps
the questions still open (`inputs`); answers to them (`respond`, from any process) take their
keys off at once and wait in the record for its runner (`take`); answers to keys not open are
ignored.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

RUNNING = ("working", "input_required")
"""Statuses of a task still running."""
TERMINAL = ("completed", "failed", "cancelled")
"""Statuses a task never leaves."""


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One task as stored: who owns it, where it runs, where it stands."""

    task_id: str
    owner: str
    """The owner's key (tenant, principal, grant): only it finds the record."""
    status: str
    created_at: float
    updated_at: float
    ttl_ms: int
    poll_ms: int
    runner: str
    """The process running it (`host:pid:token`)."""
    beat_at: float
    """When its runner last said it was alive."""
    result: str | None = None
    """A completed task's `CallToolResult`, as wire JSON."""
    error: str | None = None
    """A failed task's JSON-RPC error object, as JSON."""
    message: str | None = None
    """Words on where it stands (`statusMessage`)."""
    inputs: str | None = None
    """An `input_required` task's open questions (`inputRequests`: key → request), as JSON."""
    responses: str | None = None
    """Answers to its questions its runner has not taken yet (key → response), as JSON."""

    def expired(self, now: float) -> bool:
        """Whether its retention (`ttl_ms` from creation) has run out at `now`."""
        return now > self.created_at + self.ttl_ms / 1000


class TaskRecords(Protocol):
    """Where task records live. Thread-safe; every method is one short transaction."""

    def create(self, record: TaskRecord) -> None:
        """Store a new record (its id is fresh)."""
        ...

    def get(self, task_id: str, owner: str) -> TaskRecord | None:
        """The record of `task_id` if `owner` owns it and it has not expired; else None."""
        ...

    def finish(self, task_id: str, status: str, *, result: str | None = None,
               error: str | None = None, message: str | None = None) -> bool:
        """Set a running record's final `status` (and result, error or words); False when it
        was no longer running (nothing changed)."""
        ...

    def beat(self, runner: str) -> list[str]:
        """Mark `runner`'s running records alive now; the ids of its records no longer running
        (finished, or cancelled by another process: its run there should stop)."""
        ...

    def sweep(self) -> int:
        """Forget every record past its retention; how many."""
        ...

    def ask(self, task_id: str, inputs: str | None) -> bool:
        """A running record's open questions (JSON, key → request): `input_required` with them,
        or `working` again with None; False when it was no longer running."""
        ...

    def respond(self, task_id: str, owner: str, responses: dict[str, Any]) -> bool:
        """Answers to `owner`'s record's open questions: their keys leave `inputs` (the record is
        `working` once none is open) and the answers wait for its runner; keys not open are
        ignored. False when the record was not waiting on input."""
        ...

    def take(self, task_id: str) -> dict[str, Any]:
        """The answers waiting for the record's runner (now no longer waiting)."""
        ...


def answered(record: TaskRecord, responses: dict[str, Any]
             ) -> tuple[str | None, str | None, bool] | None:
    """(inputs, responses, still asking) of `record` once `responses` answer its open questions
    (keys not open ignored), or None when it is not waiting on input."""
    if record.status != "input_required" or record.inputs is None:
        return None
    open_ = json.loads(record.inputs)
    kept = json.loads(record.responses) if record.responses else {}
    for key, response in responses.items():
        if key in open_:
            del open_[key]
            kept[key] = response
    return (json.dumps(open_) if open_ else None, json.dumps(kept) if kept else None,
            bool(open_))


class MemoryTasks:
    """Task records in this process (the memory state's)."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or time.time
        self._records: dict[str, TaskRecord] = {}
        self._lock = threading.Lock()

    def create(self, record: TaskRecord) -> None:
        """See `TaskRecords.create`."""
        with self._lock:
            self._records[record.task_id] = record

    def get(self, task_id: str, owner: str) -> TaskRecord | None:
        """See `TaskRecords.get`."""
        with self._lock:
            found = self._records.get(task_id)
        if found is None or found.owner != owner or found.expired(self.clock()):
            return None
        return found

    def finish(self, task_id: str, status: str, *, result: str | None = None,
               error: str | None = None, message: str | None = None) -> bool:
        """See `TaskRecords.finish`."""
        with self._lock:
            found = self._records.get(task_id)
            if found is None or found.status not in RUNNING:
                return False
            self._records[task_id] = replace(found, status=status, updated_at=self.clock(),
                                             result=result, error=error, message=message)
            return True

    def beat(self, runner: str) -> list[str]:
        """See `TaskRecords.beat`."""
        now = self.clock()
        gone: list[str] = []
        with self._lock:
            for key, found in self._records.items():
                if found.runner != runner:
                    continue
                if found.status in RUNNING:
                    self._records[key] = replace(found, beat_at=now)
                else:
                    gone.append(key)
        return gone

    def sweep(self) -> int:
        """See `TaskRecords.sweep`."""
        now = self.clock()
        with self._lock:
            old = [k for k, r in self._records.items() if r.expired(now)]
            for key in old:
                del self._records[key]
        return len(old)

    def ask(self, task_id: str, inputs: str | None) -> bool:
        """See `TaskRecords.ask`."""
        with self._lock:
            found = self._records.get(task_id)
            if found is None or found.status not in RUNNING:
                return False
            self._records[task_id] = replace(
                found, status="input_required" if inputs else "working",
                updated_at=self.clock(), inputs=inputs)
            return True

    def respond(self, task_id: str, owner: str, responses: dict[str, Any]) -> bool:
        """See `TaskRecords.respond`."""
        with self._lock:
            found = self._records.get(task_id)
            if found is None or found.owner != owner:
                return False
            after = answered(found, responses)
            if after is None:
                return False
            inputs, kept, asking = after
            self._records[task_id] = replace(
                found, inputs=inputs, responses=kept, updated_at=self.clock(),
                status="input_required" if asking else "working")
            return True

    def take(self, task_id: str) -> dict[str, Any]:
        """See `TaskRecords.take`."""
        with self._lock:
            found = self._records.get(task_id)
            if found is None or found.responses is None:
                return {}
            self._records[task_id] = replace(found, responses=None)
        taken: dict[str, Any] = json.loads(found.responses)
        return taken
