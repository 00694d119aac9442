"""What the async path costs per tool call, against the sync one, measured in the same run.

    .venv/bin/python benchmarks/async_dispatch.py [--number N] [--repeat R]

Rows: a sync turn of one call — `Dispatcher.dispatch` and recording the tool message, what the
sync harness did per call (the baseline) — `Dispatcher.adispatch` of an async tool
(awaited on the loop, no thread hop), `Session.dispatch` of one async call (a turn: gather,
the recorded tool message), of one sync call (its pipeline in a worker thread), and of a turn of
20 async calls (per call). Interleaved repeats, best of each; µs per call and the difference
from the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import byref
from byref.dispatch import Call


@byref.tool
def lookup(id: int) -> dict[str, Any]:
    """A small sync tool."""
    return {"id": id, "name": f"item {id}"}


@byref.tool
async def alookup(id: int) -> dict[str, Any]:
    """The same tool, async."""
    return {"id": id, "name": f"item {id}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    session = byref.Session([lookup, alookup], store=None)
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

    async def session_turn() -> None:
        await session.dispatch(turn, call_seq=0)

    async def timed(fn: Callable[[], Awaitable[None]], n: int) -> float:
        started = time.perf_counter()
        for _ in range(n):
            await fn()
        return (time.perf_counter() - started) / n

    async def run() -> dict[str, float]:
        best: dict[str, float] = {}
        rows: list[tuple[str, Callable[[], Awaitable[None]], int]] = [
            ("adispatch, async tool", adispatch, 1),
            ("Session.dispatch, 1 async call", session_async, 1),
            ("Session.dispatch, 1 sync call (thread)", session_sync, 1),
            ("Session.dispatch, 20 async calls", session_turn, 20),
        ]
        for _ in range(args.repeat):  # interleaved: drift on a shared machine hits all alike
            started = time.perf_counter()
            for _ in range(args.number):
                sync_dispatch()
            base = (time.perf_counter() - started) / args.number
            key = "sync turn: dispatch + record (baseline)"
            best[key] = min(best.get(key, 1e9), base)
            for name, fn, calls in rows:
                per = await timed(fn, max(1, args.number // calls)) / calls
                best[name] = min(best.get(name, 1e9), per)
        return best

    best = asyncio.run(run())
    base = best["sync turn: dispatch + record (baseline)"]
    print("adispatch records no message: compare it with dispatch alone (the baseline less "
          "the append)")
    print(f"{'path':42} {'µs/call':>9} {'vs sync µs':>11}")
    for name, value in best.items():
        print(f"{name:42} {value * 1e6:9.1f} {(value - base) * 1e6:+11.1f}")
    print("best of interleaved repeats; the session rows include recording the tool message")


if __name__ == "__main__":
    main()
