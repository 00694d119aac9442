"""Conversations held by this process: the gateway's default when nothing is durable.

A real implementation of the port, not a test double: it keeps the same laws as the SQL ones
within one process. A record's lines live in a list, or (`spill=`) in a nameless temporary file
per conversation with an 8-byte-a-line index, so a long session costs its index, not its
results; deleting or expiring a conversation frees its file. Nothing survives the process.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from byref.conversations.port import (
    DEFAULT_TTL,
    Conversation,
    ConversationBusy,
    SeqConflict,
    busy_text,
)
from byref.conversations.tasks import MemoryTasks, TaskRecords
from byref.store import Scope


class _Spill:
    """Lines in a nameless file; a batch is one positional write, indexed only once whole."""

    def __init__(self, directory: Path | None) -> None:
        self._fh: BinaryIO = tempfile.TemporaryFile(dir=directory, buffering=0)  # noqa: SIM115
        self._starts = array("Q")
        self._size = 0

    def __len__(self) -> int:
        return len(self._starts)

    def extend(self, lines: Sequence[bytes]) -> None:
        data = b"".join(lines)
        view, at, start = memoryview(data), 0, self._size
        try:
            while at < len(view):
                at += os.pwrite(self._fh.fileno(), view[at:], start + at)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fh.fileno(), start)  # a partial batch is never indexed
            raise
        for line in lines:
            self._starts.append(start)
            start += len(line)
        self._size = start

    def read(self, index: int, count: int) -> list[bytes]:
        stop = min(len(self._starts), index + count)
        if index >= stop:
            return []
        begin = self._starts[index]
        end = self._starts[stop] if stop < len(self._starts) else self._size
        blob = os.pread(self._fh.fileno(), end - begin, begin)
        return [blob[self._starts[i] - begin:(self._starts[i + 1] if i + 1 < len(self._starts)
                                             else self._size) - begin]
                for i in range(index, stop)]

    def close(self) -> None:
        self._fh.close()


@dataclass
class _Record:
    conversation: Conversation
    lines: list[bytes] | _Spill
    usage: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class _MemoryHold:
    state: MemoryConversations
    scope: Scope

    def release(self) -> None:
        with self.state._lock:
            self.state._held.discard(self.scope)


class MemoryConversations:
    """`ConversationState` in this process. `spill=True` (temp dir) or a directory: lines in a
    nameless file per conversation; `spill=False`: in a list."""

    remote = False
    durable = False

    def __init__(self, *, ttl: float | None = DEFAULT_TTL, spill: bool | str | Path = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.ttl = ttl
        self.clock = clock
        self._keep_spilled = spill is not False
        self._spill_dir = None if isinstance(spill, bool) else Path(spill)
        self._records: dict[Scope, _Record] = {}
        self._expired: dict[Scope, tuple[int, int] | None] = {}
        """Scopes whose record expired → the seq range it held (None: it held nothing)."""
        self._lock = threading.Lock()
        self._held: set[Scope] = set()
        self.tasks: TaskRecords = MemoryTasks(clock)

    def _expires(self, now: float) -> float | None:
        return None if self.ttl is None else now + self.ttl

    def _live(self, scope: Scope, now: float) -> _Record | None:
        record = self._records.get(scope)
        if record is None:
            return None
        expires = record.conversation.expires_at
        if expires is not None and expires <= now:
            self._expire(scope, record)
            return None
        return record

    def _expire(self, scope: Scope, record: _Record) -> None:
        conv = record.conversation
        if conv.length:
            first = conv.expired[0] if conv.expired else conv.origin
            self._expired[scope] = (first, conv.next_seq - 1)
        else:
            self._expired[scope] = conv.expired
        if isinstance(record.lines, _Spill):
            record.lines.close()
        del self._records[scope]

    def open(self, scope: Scope, origin: int) -> Conversation:
        """See `ConversationState.open`."""
        with self._lock:
            now = self.clock()
            record = self._live(scope, now)
            if record is None:
                expired = self._expired.get(scope)
                start = origin if expired is None else max(origin, expired[1] + 1)
                lines: list[bytes] | _Spill = (
                    _Spill(self._spill_dir) if self._keep_spilled else [])
                record = self._records[scope] = _Record(
                    Conversation(scope, start, 0, self._expires(now), expired=expired), lines)
            c = record.conversation
            record.conversation = Conversation(c.scope, c.origin, c.length, self._expires(now),
                                               c.working_set, c.usage, c.expired)
            return record.conversation

    def find(self, scope: Scope) -> Conversation | None:
        """See `ConversationState.find`."""
        with self._lock:
            record = self._live(scope, self.clock())
            return None if record is None else record.conversation

    def conversations(self, tenant: str | None = None,
                      principal: str | None = None) -> list[Conversation]:
        """See `ConversationState.conversations`."""
        with self._lock:
            now = self.clock()
            found = [r.conversation for s, r in list(self._records.items())
                     if (tenant is None or s.tenant == tenant)
                     and (principal is None or s.principal == principal)
                     and self._live(s, now) is not None]
        return sorted(found, key=lambda c: (c.scope.tenant, c.scope.principal,
                                            c.scope.conversation))

    def append(self, scope: Scope, first_seq: int, lines: Sequence[bytes], *,
               working_set: Sequence[str] | None = None,
               usage: Sequence[tuple[str, str]] = ()) -> None:
        """See `ConversationState.append`; raises SeqConflict when the record is gone or
        `first_seq` does not continue it."""
        with self._lock:
            record = self._open_record(scope)
            if first_seq != record.conversation.next_seq:
                raise SeqConflict(f"Conversation {str(scope)!r} continues at seq "
                                  f"{record.conversation.next_seq}, not {first_seq}; another "
                                  "writer appended first. Nothing was written.")
            self._extend(record, lines, working_set, usage)

    def append_numbered(self, scope: Scope, head: bytes, tail: bytes) -> int:
        """See `ConversationState.append_numbered`."""
        with self._lock:
            record = self._open_record(scope)
            seq = record.conversation.next_seq
            self._extend(record, [head + str(seq).encode() + tail], None, ())
            return seq

    def _open_record(self, scope: Scope) -> _Record:
        record = self._live(scope, self.clock())
        if record is None:
            raise SeqConflict(f"Conversation {str(scope)!r} is not open (it expired or was "
                              "deleted); open it again to start a new record.")
        return record

    def _extend(self, record: _Record, lines: Sequence[bytes],
                working_set: Sequence[str] | None, usage: Sequence[tuple[str, str]]) -> None:
        if isinstance(record.lines, _Spill):
            record.lines.extend(lines)
        else:
            record.lines.extend([bytes(line) for line in lines])  # whole, or not at all
        record.usage.extend(usage)
        conv = record.conversation
        # Built directly, not with dataclasses.replace: this runs once a gateway call.
        record.conversation = Conversation(
            conv.scope, conv.origin, conv.length + len(lines), self._expires(self.clock()),
            conv.working_set if working_set is None else tuple(working_set),
            conv.usage + len(usage), conv.expired)

    def save(self, scope: Scope, *, working_set: Sequence[str] | None = None,
             usage: Sequence[tuple[str, str]] = ()) -> None:
        """See `ConversationState.save`."""
        with self._lock:
            self._extend(self._open_record(scope), [], working_set, usage)

    def lines(self, scope: Scope, first_seq: int, count: int) -> list[bytes]:
        """See `ConversationState.lines`."""
        with self._lock:
            record = self._live(scope, self.clock())
            if record is None or count <= 0:
                return []
            index = first_seq - record.conversation.origin
            if index < 0:
                return []
            if isinstance(record.lines, _Spill):
                return record.lines.read(index, count)
            return record.lines[index:index + count]

    def usage(self, scope: Scope) -> list[tuple[str, str]]:
        """See `ConversationState.usage`."""
        with self._lock:
            record = self._live(scope, self.clock())
            return [] if record is None else list(record.usage)

    def delete(self, scope: Scope) -> bool:
        """See `ConversationState.delete` (a remembered expired range counts as existing)."""
        with self._lock:
            tombstone = scope in self._expired
            self._expired.pop(scope, None)
            record = self._records.pop(scope, None)
            if record is not None and isinstance(record.lines, _Spill):
                record.lines.close()
            return record is not None or tombstone

    def hold(self, scope: Scope) -> _MemoryHold:
        """See `ConversationState.hold` (held in this instance: no other process shares it)."""
        with self._lock:
            if scope in self._held:
                raise ConversationBusy(busy_text(scope))
            self._held.add(scope)
        return _MemoryHold(self, scope)

    def sweep(self) -> int:
        """See `ConversationState.sweep`."""
        with self._lock:
            now = self.clock()
            due = [s for s, r in self._records.items()
                   if r.conversation.expires_at is not None and r.conversation.expires_at <= now]
            for scope in due:
                self._expire(scope, self._records[scope])
            return len(due)

    def close(self) -> None:
        """Forget every conversation and delete their spill files."""
        with self._lock:
            for record in self._records.values():
                if isinstance(record.lines, _Spill):
                    record.lines.close()
            self._records.clear()
