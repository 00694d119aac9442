"""What the async path costs per tool call against the sync one, measured in the same run.

Rows: a sync turn of one call — `Dispatcher.dispatch` and recording the tool message, what the
sync harness did per call (the baseline) — then `Dispatcher.adispatch` of an async tool
(awaited on the loop, no thread hop), `Session.dispatch` of one async call (a turn: the recorded
tool message), of one sync call (its pipeline in a worker thread), `Session.run_call` (the
gateway's sequence: the call and its result each recorded), and a turn of 20 async calls (per
call). Interleaved repeats, best of each; µs per call and the difference from the baseline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from byref.dispatch import Call
from byref.harness.session import Session
from byref.tools import tool

BASELINE = "sync turn: dispatch + record (baseline)"


@tool
def lookup(id: int) -> dict[str, Any]:
    """A small sync tool."""
    return {"id": id, "name": f"item {id}"}


@tool
async def alookup(id: int) -> dict[str, Any]:
    """The same tool, async."""
    return {"id": id, "name": f"item {id}"}


def async_dispatch_bench(number: int = 400, repeat: int = 5) -> dict[str, dict[str, float]]:
    """µs per call of each path and its difference from the sync baseline (best of `repeat`
    interleaved rounds of `number` calls)."""
    session = Session([lookup, alookup], store=None)
    dispatcher = session.dispatcher
    sync_call, async_call = Call("c", "lookup", {"id": 7}), Call("c", "alookup", {"id": 7})
    turn = [Call(f"c{i}", "alookup", {"id": i}) for i in range(20)]

    def sync_dispatch() -> None:
        part = dispatcher.dispatch(sync_call, call_seq=0, seq=1, part=0)
        session.transcript.append("tool", [part])

    async def adispatch() -> None:
        await dispatcher.adispatch(async_call, call_seq=0, seq=1, part=0)

    async def session_async() -> None:
        await session.dispatch([async_call], call_seq=0)

    async def session_sync() -> None:
        await session.dispatch([sync_call], call_seq=0)

    async def run_call() -> None:
        await session.run_call(async_call, exclusive=False)

    async def session_turn() -> None:
        await session.dispatch(turn, call_seq=0)

    rows: list[tuple[str, Callable[[], Awaitable[None]], int]] = [
        ("adispatch, async tool", adispatch, 1),
        ("Session.dispatch, 1 async call", session_async, 1),
        ("Session.dispatch, 1 sync call (thread)", session_sync, 1),
        ("Session.run_call, async tool", run_call, 1),
        ("Session.dispatch, 20 async calls", session_turn, 20),
    ]

    async def timed(fn: Callable[[], Awaitable[None]], n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await fn()
        return (time.perf_counter() - started) / n

    async def rounds() -> dict[str, float]:
        best: dict[str, float] = {}
        for _ in range(repeat):  # interleaved: drift on a shared machine hits every row alike
            started = time.perf_counter()
            for _ in range(number):
                sync_dispatch()
            best[BASELINE] = min(best.get(BASELINE, 1e9), (time.perf_counter() - started) / number)
            for name, fn, calls in rows:
                per = await timed(fn, max(1, number // calls)) / calls
                best[name] = min(best.get(name, 1e9), per)
        return best

    best = asyncio.run(rounds())
    base = best[BASELINE]
    session.transcript.close()
    return {name: {"us": round(v * 1e6, 1), "vs_sync_us": round((v - base) * 1e6, 1)}
            for name, v in best.items()}
