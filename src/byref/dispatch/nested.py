"""Calls a running tool makes to other tools (code mode), through the dispatcher that runs it.

The law: an inner call is a model's call in every respect but who wrote it — the same
`Dispatcher`, so the same tools, scope, store, policy, refs (a Message ref without a seq is
pinned to the run's own turn), `wants`, placement, events and refusals. It is recorded with its
lineage, not in the conversation (whose next message is the run's own result): in the run's
record, a transcript of its own whose call ids are `<run id>.<n>`, stored when the run ends
(`keep_record`) as `record/code-run` with the run's id in its label. On an event loop (the
outer call came through `adispatch`) every inner call is dispatched on that loop, so an async
tool (an upstream's) meets its connection where it lives; without one, an async tool on a loop
of its own and a sync tool on a thread of its own.

A call the run gives up on (`stop`: its timeout, or the run's end) is cancelled for real where
it can be — an async tool's task is cancelled, and an upstream call cancelled so tells its
server (`notifications/cancelled`, as when a client cancels) — and recorded so in the run's
record; a sync tool's thread cannot be stopped: it runs to its end, its result dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from byref.dispatch.calls import Call
from byref.dispatch.outbound.reflines import without
from byref.errors import RefusalReason
from byref.jsonview import encode
from byref.store import PutOptions
from byref.tools.tool import Tool
from byref.transcript import Part, Transcript

if TYPE_CHECKING:
    from byref.dispatch.pipeline import Dispatcher

Search = Callable[[str, int], list[dict[str, Any]]]
"""A catalog's search for code: query, limit → [{name, description}] (set by the session)."""
InnerOutcome = Literal["ok", "error", "cancelled"]
InnerDone = Callable[[str, InnerOutcome, float], None]
"""Told of each inner call as it ends: the tool's name, its outcome and its seconds (the gateway
counts them in its metrics). A call that could not be stopped is told of when it really ends."""
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class _Running:
    """One inner call in flight: the call, when it started, and how to cancel it (None: a sync
    tool on a thread, which cannot be stopped)."""

    call: Call
    started: float
    cancel: Callable[[], object] | None


class NestedCalls:
    """`ctx.calls` for one run: dispatches its inner calls and keeps their record."""

    def __init__(self, dispatcher: Dispatcher, run: Call, call_seq: int,
                 loop: asyncio.AbstractEventLoop | None) -> None:
        self.dispatcher = dispatcher
        self.run_id = run.id
        self.run_tool = run.name
        self.call_seq = call_seq
        self.loop = loop
        self.record = Transcript()
        self._count = 0
        self._lock = threading.Lock()
        self._running: dict[concurrent.futures.Future[Part], _Running] = {}
        self._stopped: set[str] = set()
        """Ids of calls given up on: recorded as stopped, their late results not recorded."""
        self._recorded_ids: set[str] = set()
        self._context = contextvars.copy_context()
        """The run's own context (who it runs as: the gateway's caller), for its inner calls."""

    def tool(self, name: str) -> Tool | None:
        """The tool a call by `name` would run, or None."""
        return self.dispatcher.tools.get(name)

    def names(self) -> list[str]:
        """Every tool an inner call may name."""
        return sorted(self.dispatcher.tools)

    def unknown(self, name: str) -> str | None:
        """Why `name` cannot run yet (the dispatcher's `unknown_tool`: a server still
        starting), or None."""
        hint = self.dispatcher.unknown_tool
        return None if hint is None or name in self.dispatcher.tools else hint(name)

    def start(self, name: str, args: dict[str, Any],
              server_refs: frozenset[str] = frozenset()) -> concurrent.futures.Future[Part]:
        """Dispatch `name(args)` as a call of this run; the future's part is its result.
        `server_refs` names the arguments whose ref the caller built (`Call.server_refs`)."""
        with self._lock:
            self._count += 1
            call = Call(f"{self.run_id}.{self._count}", name, args, server_refs)
        found = self.dispatcher.tools.get(name)
        cancellable = found is None or found.is_async  # an unknown name is refused at once
        future: concurrent.futures.Future[Part]
        if self.loop is not None and self.loop.is_running():
            # Started in the run's context, not the program's channel thread's (an empty one):
            # the call runs as whoever ran the program.
            future = self._context.copy().run(asyncio.run_coroutine_threadsafe,
                                              self._adispatch(call), self.loop)
        elif cancellable:
            future = self._on_own_loop(call)
        else:
            future = self._on_thread(call)
        # Cancelling the future cancels its task (`run_coroutine_threadsafe` chains them); a
        # sync tool's task would only wait for its thread, so it is left to end.
        running = _Running(call, time.perf_counter(), future.cancel if cancellable else None)
        with self._lock:
            self._running[future] = running
        future.add_done_callback(self._ended)
        return future

    def _on_own_loop(self, call: Call) -> concurrent.futures.Future[Part]:
        """An async tool with no loop to run on: a loop of its own on a thread, ended with it."""
        loop = asyncio.new_event_loop()

        def run() -> None:
            try:
                loop.run_forever()
                # Stopped when the call's future ended: a cancelled call's task unwinds here
                # (an upstream is told of the cancellation), then the loop closes.
                pending = asyncio.all_tasks(loop)
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

        future = asyncio.run_coroutine_threadsafe(self._adispatch(call), loop)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(loop.stop))
        threading.Thread(target=run, name=f"byref-inner-{call.id}", daemon=True).start()
        return future

    def _on_thread(self, call: Call) -> concurrent.futures.Future[Part]:
        future: concurrent.futures.Future[Part] = concurrent.futures.Future()

        def work() -> None:
            if future.set_running_or_notify_cancel():
                future.set_result(self._recorded(call, self.dispatcher.dispatch(
                    call, call_seq=self.call_seq, seq=self.call_seq + 1, part=0)))

        threading.Thread(target=work, name=f"byref-inner-{call.id}", daemon=True).start()
        return future

    def stop(self, future: concurrent.futures.Future[Part], reason: RefusalReason,
             why: str) -> tuple[Part, bool]:
        """Give up on the call `future` stands for (`why`: "did not finish within 30s, …"):
        cancel it where it can be, and record it so in the run's record. Returns the error part
        recorded (its words say whether it was cancelled) and whether it was; a sync tool on a
        thread cannot be stopped: it runs to its end, its result dropped."""
        with self._lock:
            running = self._running[future]
        call, ended = running.call, future.done()  # ended meanwhile: nothing runs any more
        cancelled = ended or running.cancel is not None
        if running.cancel is not None:
            running.cancel()
        text = (f"Tool {call.name!r} {why}; it was cancelled." if cancelled else
                f"Tool {call.name!r} {why}; it runs on a thread, which cannot be stopped: it "
                "runs to its end and its result is dropped.")
        part = Part(type="tool_result", value=text, rendered=text, tool=call.name,
                    call_id=call.id, is_error=True, reason=reason)
        with self._lock:
            if call.id not in self._stopped and call.id not in self._recorded_ids:
                self._stopped.add(call.id)
                self.record.append("assistant", [self.dispatcher.call_part(call)])
                self.record.append("tool", [part])
        return part, cancelled

    def _ended(self, future: concurrent.futures.Future[Part]) -> None:
        told = self.dispatcher.inner_done
        if told is None:
            return
        with self._lock:
            running = self._running[future]
        outcome: InnerOutcome
        if future.cancelled() or future.exception() is not None:
            outcome = "cancelled"
        else:
            outcome = "error" if future.result().is_error else "ok"
        told(running.call.name, outcome, time.perf_counter() - running.started)

    async def _adispatch(self, call: Call) -> Part:
        part = await self.dispatcher.adispatch(call, call_seq=self.call_seq,
                                               seq=self.call_seq + 1, part=0)
        return self._recorded(call, part)

    def _recorded(self, call: Call, part: Part) -> Part:
        # The result's ref line would name the conversation's message: the record holds it
        # without one (the code is given values and handles, never that line).
        part = without(part)
        with self._lock:
            if call.id not in self._stopped:  # given up on: recorded as stopped already
                self._recorded_ids.add(call.id)
                self.record.append("assistant", [self.dispatcher.call_part(call)])
                self.record.append("tool", [part])
        return part

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """The session's catalog search when it set one; else the callable tools ranked by the
        query's words in their names and descriptions."""
        limit = max(1, min(limit, 50))
        if self.dispatcher.search is not None:
            return self.dispatcher.search(query, limit)
        words = set(_WORD.findall(query.lower()))
        scored = []
        for name, t in self.dispatcher.tools.items():
            text = set(_WORD.findall(f"{name} {name.replace('_', ' ')} {t.description}".lower()))
            score = len(words & text)
            if score or not words:
                scored.append((-score, name, t))
        return [{"name": name, "description": first_sentence(t.description)}
                for _, name, t in sorted(scored)[:limit]]

    def keep_record(self) -> str | None:
        """Store the record of this run's inner calls (JSON lines); its ref, or None when
        nothing was called or there is no store."""
        store = self.dispatcher.store
        if store is None or not len(self.record):
            return None
        data = b"".join(encode(m.to_json()) + b"\n" for m in self.record)
        meta = store.put(self.dispatcher.scope, data, PutOptions(
            kind="record/code-run", media_type="application/jsonl",
            label=f"inner calls of {self.run_tool} call {self.run_id}"))
        return meta.ref


def first_sentence(text: str, limit: int = 200) -> str:
    """A description's first sentence, at most `limit` characters."""
    head = text.strip().split(". ", 1)[0].split("\n", 1)[0]
    return head if len(head) <= limit else head[:limit - 1] + "…"
