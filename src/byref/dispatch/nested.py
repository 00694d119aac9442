"""Calls a running tool makes to other tools (code mode), through the dispatcher that runs it.

The law: an inner call is a model's call in every respect but who wrote it — the same
`Dispatcher`, so the same tools, scope, store, policy, refs (a Message ref without a seq is
pinned to the run's own turn), `wants`, placement, events and refusals. It is recorded with its
lineage, not in the conversation (whose next message is the run's own result): in the run's
record, a transcript of its own whose call ids are `<run id>.<n>`, stored when the run ends
(`keep_record`) as `record/code-run` with the run's id in its label. On an event loop (the
outer call came through `adispatch`) every inner call is dispatched on that loop, so an async
tool (an upstream's) meets its connection where it lives; without one, on a thread of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from byref.dispatch.calls import Call
from byref.dispatch.reflines import without
from byref.jsonview import encode
from byref.store import PutOptions
from byref.tools.tool import Tool
from byref.transcript import Part, Transcript

if TYPE_CHECKING:
    from byref.dispatch.pipeline import Dispatcher

Search = Callable[[str, int], list[dict[str, Any]]]
"""A catalog's search for code: query, limit → [{name, description}] (set by the session)."""
_WORD = re.compile(r"[a-z0-9]+")


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

    def tool(self, name: str) -> Tool | None:
        """The tool a call by `name` would run, or None."""
        return self.dispatcher.tools.get(name)

    def names(self) -> list[str]:
        """Every tool an inner call may name."""
        return sorted(self.dispatcher.tools)

    def start(self, name: str, args: dict[str, Any]) -> concurrent.futures.Future[Part]:
        """Dispatch `name(args)` as a call of this run; the future's part is its result."""
        with self._lock:
            self._count += 1
            call = Call(f"{self.run_id}.{self._count}", name, args)
        if self.loop is not None and self.loop.is_running():
            return asyncio.run_coroutine_threadsafe(self._adispatch(call), self.loop)
        future: concurrent.futures.Future[Part] = concurrent.futures.Future()

        def work() -> None:
            if future.set_running_or_notify_cancel():
                future.set_result(self._recorded(call, self.dispatcher.dispatch(
                    call, call_seq=self.call_seq, seq=self.call_seq + 1, part=0)))

        threading.Thread(target=work, name=f"byref-inner-{call.id}", daemon=True).start()
        return future

    async def _adispatch(self, call: Call) -> Part:
        part = await self.dispatcher.adispatch(call, call_seq=self.call_seq,
                                               seq=self.call_seq + 1, part=0)
        return self._recorded(call, part)

    def _recorded(self, call: Call, part: Part) -> Part:
        # The result's ref line would name the conversation's message: the record holds it
        # without one (the code is given values and handles, never that line).
        part = without(part)
        with self._lock:
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
