"""Code mode's host under a hostile program, for real: a flood of large frames is read no faster
than it is answered (the host holds a few requests, not all of them), a deeply nested value ends
in a refusal in words with the serving thread unharmed, a closed channel is a `ToolError` even
through `tools.<name>`, and calls that cannot be stopped never hold more than the run's places."""

from __future__ import annotations

import asyncio
import gc
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.store import MemoryStore
from byref.tools import tool
from byref.tools.code_mode.channel import MAX_FRAME
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

MB = 1 << 20


def _runner() -> SubprocessRunner:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    return SubprocessRunner()


@pytest.fixture
def thread_errors() -> Iterator[list[BaseException | None]]:
    """Exceptions that escaped any thread while the test ran (none may)."""
    seen: list[BaseException | None] = []
    before = threading.excepthook
    threading.excepthook = lambda args: seen.append(args.exc_value)
    try:
        yield seen
    finally:
        threading.excepthook = before


def _run(code: str, mode: CodeMode, tools: list[Any]) -> Part:
    h = Harness(ScriptedModel([call("run_code", {"code": code}), say("done")]), tools,
                store=MemoryStore(), code_mode=mode)
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


@tool
def lookup(sku: Any) -> dict[str, Any]:
    """Look up one item's stock by sku."""
    return {"sku": str(sku)[:20], "stock": 1}


# Writes 120 calls of 3.9 MB each straight onto the channel (as fast as the host takes them),
# then reads their answers: the flood.
_FLOOD = """
import msgspec, os, struct
channel = tools._channel
big = "x" * 3_900_000
encode = msgspec.msgpack.Encoder().encode
for i in range(120):
    body = encode({"op": "call", "id": 1000 + i, "tool": "hold", "args": {"blob": big}})
    channel_write = os.write
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        view = view[channel_write(channel.fd, view):]
reasons = {}
for _ in range(120):
    answer = channel._read()
    reasons[answer.get("reason")] = reasons.get(answer.get("reason"), 0) + 1
channel.next_id = 5000
print(sorted(reasons.items(), key=str))
"""


def _rss() -> tuple[int, int]:
    """This process's resident and peak resident memory (VmRSS, VmHWM), in bytes."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text()
                  .splitlines())
    return tuple(int(status[k].split()[0]) << 10 for k in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def test_a_flood_of_large_frames_is_read_no_faster_than_it_is_answered() -> None:
    @tool
    async def hold(blob: str) -> int:
        """Hold a call until the run gives up on it."""
        await asyncio.sleep(30)
        return len(blob)

    mode = CodeMode(runner=_runner(), max_calls=8, call_timeout=4.0, concurrency=8,
                    limits=Limits(wall_seconds=120, memory_bytes=1 << 30))
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here
    rss_before = _rss()[0]
    tracemalloc.start()
    try:
        text = _run(_FLOOD, mode, [hold]).rendered or ""
        gc.collect()  # the harness, its store and the run let go
        held_after, held_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_after, rss_peak = _rss()
    print(f"traced peak {held_peak >> 20} MiB, {held_after >> 20} MiB after; RSS "
          f"{rss_before >> 20} -> peak {rss_peak >> 20} -> {rss_after >> 20} MiB")
    assert "[('call-timeout', 8), ('limit-calls', 112)]" in text, text[:2_000]
    assert "0 tool calls; refused: hold (limit-calls) ×112, hold (call-timeout) ×8" in text
    # Before: all 120 frames read ahead and queued, 456 MiB traced (605 MiB peak RSS). Now the
    # 8 places' calls — each its decoded arguments and dispatch's copies of them (~4 frames'
    # worth) — and the one frame being refused.
    assert held_peak < 40 * MAX_FRAME
    assert held_after < 16 * MAX_FRAME  # what the run held is let go


def test_a_deeply_nested_value_ends_in_words_and_the_host_serves_on(
        thread_errors: list[BaseException | None]) -> None:
    deep = "v = 'leaf'\nfor _ in range({n}):\n    v = [v]\n"
    mode = CodeMode(runner=_runner())
    for n in (600, 900):
        part = _run(deep.format(n=n) + "v", mode, [lookup])
        text = part.rendered or ""
        assert ("the tool channel was closed: the return value nest deeper than 64 levels; "
                "flatten them") in text, text[:1_000]
        assert "[run_code] 0 tool calls; " in text
    code = deep.format(n=700) + ("try:\n    tools.lookup(sku=v)\nexcept tools.ToolError as e:\n"
                                 "    print(type(e).__name__, e.reason)\n")
    text = _run(code, mode, [lookup]).rendered or ""
    assert "ChannelClosed channel-protocol" in text
    assert "a call's arguments nest deeper than 64 levels; flatten them" in text
    assert thread_errors == []


def test_tools_on_a_closed_channel_is_a_tool_error() -> None:
    code = ("import os\nos.write(tools._channel.fd, b'\\xff\\xff\\xff\\xff')\n"
            "for attempt in (lambda: tools.lookup, lambda: tools.lookup(sku='a')):\n"
            "    try:\n        attempt()\n    except tools.ToolError as e:\n"
            "        print(type(e).__name__, e.reason)\n")
    text = _run(code, CodeMode(runner=_runner()), [lookup]).rendered or ""
    assert text.count("ChannelClosed channel-protocol") == 2, text[:1_000]
    assert "AttributeError" not in text


def test_calls_that_cannot_be_stopped_never_hold_more_than_the_places() -> None:
    release, lock = threading.Event(), threading.Lock()
    live = [0, 0]  # now, most at once

    @tool
    def stall() -> str:
        """Wait for the test to let go (at most 30 s)."""
        with lock:
            live[0] += 1
            live[1] = max(live)
        try:
            release.wait(30)
        finally:
            with lock:
                live[0] -= 1
        return "late"

    code = ("got = tools.gather([('stall', {})] * 14, return_exceptions=True)\n"
            "print(sorted(getattr(g, 'reason', 'ok') for g in got))")
    try:
        text = _run(code, CodeMode(runner=_runner(), call_timeout=0.5, concurrency=8),
                    [stall]).rendered or ""
    finally:
        release.set()
    assert live[1] == 8, text[:1_000]
    assert "'call-timeout', " * 7 + "'call-timeout', 'limit-calls'" in text
    assert "0 tool calls; refused: stall (call-timeout) ×8, stall (limit-calls) ×6" in text
