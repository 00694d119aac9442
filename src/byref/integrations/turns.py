"""`TurnRecord`: a framework's tool calls recorded as byref's transcript records a model turn.

The law of the record: a framework runs one model turn's tool calls one call at a time through
its own hook, possibly concurrently, while byref addresses a result by the transcript message
that holds it. So a turn's calls are reserved as one batch: the assistant message holding every
call of the turn is appended when the first of them arrives (the caller names its siblings
when the framework shows them), each result is dispatched with the address it will have, and
the tool message is appended when the last one finishes. A call the framework never made (it
refused the arguments itself, or the run stopped) is recorded as not run when the next turn
starts. A call whose siblings are unknown is a batch of its own and waits for the batch before
it, so addresses never collide.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from byref.dispatch import Call, Dispatcher
from byref.transcript import Part, Transcript

NOT_RUN = "This call was not run (the framework did not execute it); call the tool again."
"""Recorded for a reserved call the framework never made, so the turn's record is whole."""


@dataclass
class Batch:
    """One model turn's calls: where their assistant message is and which have run."""

    call_seq: int
    calls: list[Call]
    index: dict[str, int]
    parts: list[Part | None]
    started: set[int] = field(default_factory=set)
    running: int = 0
    idle: threading.Event = field(default_factory=threading.Event)


class TurnRecord:
    """Reserves each routed call's place in `transcript` (`reserve`), records its result
    (`finish`) and closes a turn the framework left incomplete (`settle`)."""

    def __init__(self, transcript: Transcript, dispatcher: Dispatcher) -> None:
        self.transcript = transcript
        self.dispatcher = dispatcher
        self.results: dict[str, Part] = {}
        """Every recorded result by call id (the working-set projection reads what it stored)."""
        self._open: Batch | None = None
        self._lock = threading.Lock()

    def reserve(self, call: Call, siblings: Sequence[tuple[str, str, Any]]
                ) -> tuple[Batch, int] | threading.Event:
        """`call`'s batch and place in it, or the event to wait on before asking again (the
        open batch is still running and `call` is not one of its calls)."""
        with self._lock:
            batch = self._open
            if batch is not None:
                index = batch.index.get(call.id)
                if index is not None and index not in batch.started:
                    self._start(batch, index)
                    return batch, index
                if batch.running:
                    return batch.idle
                self._flush(batch)
            members = [Call(i, n, {} if a is None else a) for i, n, a in siblings
                       if n in self.dispatcher.tools]
            if call.id not in {c.id for c in members} or len({c.id for c in members}) != len(
                    members):
                members = [call]
            else:
                members = [call if c.id == call.id else c for c in members]
            seq = self.transcript.append(
                "assistant", [self.dispatcher.call_part(c) for c in members]).seq
            batch = Batch(seq, members, {c.id: i for i, c in enumerate(members)},
                          [None] * len(members))
            self._open = batch
            index = batch.index[call.id]
            self._start(batch, index)
            return batch, index

    def finish(self, batch: Batch, index: int, part: Part) -> None:
        """Record one call's result; the turn's tool message is appended with its last."""
        with self._lock:
            batch.parts[index] = part
            if part.call_id is not None:
                self.results[part.call_id] = part
            batch.running -= 1
            if batch.running == 0:
                batch.idle.set()
                if all(p is not None for p in batch.parts) and self._open is batch:
                    self._flush(batch)

    def settle(self) -> None:
        """Record the turn's calls the framework never made (call before the next request)."""
        with self._lock:
            if self._open is not None and self._open.running == 0:
                self._flush(self._open)

    @staticmethod
    def _start(batch: Batch, index: int) -> None:
        batch.started.add(index)
        batch.running += 1
        batch.idle.clear()

    def _flush(self, batch: Batch) -> None:
        parts = [p if p is not None else Part(
            type="tool_result", value=NOT_RUN, rendered=NOT_RUN, tool=c.name, call_id=c.id,
            is_error=True) for c, p in zip(batch.calls, batch.parts, strict=True)]
        self.transcript.append("tool", parts)
        self._open = None
        batch.idle.set()
