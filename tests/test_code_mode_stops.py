"""Code mode: an inner call the run gives up on (past `call_timeout`, or still running when the
run's wall clock ends) is cancelled for real where it can be, recorded so in the run's record
and its events; a sync tool's thread cannot be stopped, so it is bounded instead."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from byref.dispatch import Call
from byref.events import Emitter, MemorySink
from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import MemoryStore
from byref.tools import tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part


def _runner() -> SubprocessRunner:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    return SubprocessRunner()


class _Seen:
    """What the tools saw: an async call's cancellation, a sync call let go by the test."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.finished = threading.Event()
        self.release = threading.Event()


def _tools(seen: _Seen) -> list[Any]:
    @tool
    async def linger() -> str:
        """Wait a long time for an answer from far away."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.cancelled.set()
            raise
        seen.finished.set()
        return "late"

    @tool
    def stall() -> str:
        """Wait for the test to let go (at most 30 s)."""
        seen.release.wait(30)
        return "late"

    @tool
    def lookup(sku: str) -> dict[str, Any]:
        """Look up one item's stock by sku."""
        return {"sku": sku, "stock": len(sku)}

    return [linger, stall, lookup]


def _harness(code: str, mode: CodeMode, seen: _Seen, sink: MemorySink) -> Harness:
    return Harness(ScriptedModel([call("run_code", {"code": code}), say("done")]), _tools(seen),
                   store=MemoryStore(), code_mode=mode, emit=Emitter(sink))


def _result(h: Harness) -> Part:
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def _record(h: Harness, part: Part) -> list[dict[str, Any]]:
    """The run's record: its inner calls' result parts, in order."""
    key = (part.rendered or "").split("record ")[1].split(".")[0]
    assert h.store is not None
    kept = h.store.get(h.scope, key)
    assert kept is not None
    lines = [decode(line) for line in kept.data.splitlines()]
    return [ln["parts"][0] for ln in lines if ln["role"] == "tool"]


def _stops(sink: MemorySink) -> list[dict[str, Any]]:
    return [e.data for e in sink.events if e.name == "refused" and e.data.get("op") == "code-call"]


def test_an_async_call_past_its_timeout_is_cancelled_and_recorded_so() -> None:
    seen, sink = _Seen(), MemorySink()
    h = _harness("try:\n    tools.linger()\nexcept tools.ToolError as e:\n"
                 "    print(e.reason, e.text)\nprint(tools.lookup(sku='a'))",
                 CodeMode(runner=_runner(), call_timeout=0.5), seen, sink)
    h.run_sync("go")
    part = _result(h)
    text = part.rendered or ""
    assert ("call-timeout Tool 'linger' did not finish within 0.5s, the limit for one call from "
            "code; it was cancelled.") in text
    assert "{'sku': 'a', 'stock': 1}" in text
    assert seen.cancelled.wait(5) and not seen.finished.is_set()  # the task itself was cancelled
    run_id = next(p for m in h.transcript for p in m.parts if p.type == "tool_call").call_id
    stopped, looked_up = _record(h, part)
    assert (stopped["call_id"], stopped["is_error"], stopped["value"]) == (
        f"{run_id}.1", True, "Tool 'linger' did not finish within 0.5s, the limit for one call "
        "from code; it was cancelled.")
    assert looked_up["call_id"] == f"{run_id}.2" and not looked_up.get("is_error")
    [event] = _stops(sink)
    assert (event["call_id"], event["reason"], event["detail"]) == (
        f"{run_id}.1", "call-timeout", "cancelled")


def test_without_an_event_loop_an_async_inner_call_is_cancelled_too() -> None:
    seen, sink = _Seen(), MemorySink()
    h = _harness("print(1)", CodeMode(runner=_runner(), call_timeout=0.5), seen, sink)
    # dispatch() from plain code: no loop runs the inner calls, so each async one gets its own.
    part = h.dispatcher.dispatch(Call("run", "run_code", {
        "code": "try:\n    tools.linger()\nexcept tools.ToolError as e:\n    print(e.text)"}),
        call_seq=1, seq=2, part=0)
    assert "did not finish within 0.5s, the limit for one call from code; it was cancelled." \
        in (part.rendered or "")
    assert seen.cancelled.wait(5) and not seen.finished.is_set()


def test_calls_still_running_when_the_wall_clock_ends_are_cancelled_and_recorded() -> None:
    seen, sink = _Seen(), MemorySink()
    h = _harness("tools.linger()", CodeMode(runner=_runner(), call_timeout=30,
                                            limits=Limits(wall_seconds=2.0)), seen, sink)
    h.run_sync("go")
    part = _result(h)
    text = part.rendered or ""
    assert part.is_error and "wall-clock limit" in text
    assert "refused: linger (call-timeout) ×1" in text
    assert seen.cancelled.wait(5) and not seen.finished.is_set()
    [stopped] = _record(h, part)
    assert stopped["value"] == ("Tool 'linger' did not finish before the run ended; it was "
                                "cancelled.")


def test_a_sync_call_cannot_be_stopped_so_it_keeps_its_place_until_it_returns() -> None:
    seen, sink = _Seen(), MemorySink()
    code = ("for name in ('stall', 'lookup'):\n    try:\n        print(tools.call(name, "
            "{'sku': 'a'} if name == 'lookup' else {}))\n"
            "    except tools.ToolError as e:\n        print(e.reason, e.text)")
    h = _harness(code, CodeMode(runner=_runner(), call_timeout=0.5, concurrency=1), seen, sink)
    try:
        h.run_sync("go")
    finally:
        seen.release.set()
    part = _result(h)
    lines = (part.rendered or "").splitlines()
    assert ("call-timeout Tool 'stall' did not finish within 0.5s, the limit for one call from "
            "code; it runs on a thread, which cannot be stopped: it runs to its end and its "
            "result is dropped.") in lines
    assert ("limit-calls Tool 'lookup' was not called: calls from this run still running past "
            "their time (a tool on a thread cannot be stopped) fill the places for calls at once "
            "(1). Return what you have.") in lines
    [stopped] = _record(h, part)  # the late result never joins the record
    assert stopped["is_error"] and "cannot be stopped" in stopped["value"]
    assert [e["detail"] for e in _stops(sink) if e["reason"] == "call-timeout"] == [
        "still running on a thread"]
