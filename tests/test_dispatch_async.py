"""`Dispatcher.adispatch`: async tools awaited on the loop, the same refusals and events as
`dispatch`, a thread hop only where a stage may block, and nothing raises out of it."""

from __future__ import annotations

import asyncio
import functools
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import msgspec
import pytest

from _waits import scaled
from byref.dispatch import Call, Dispatcher, Policy
from byref.events import Emitter, MemorySink
from byref.refs import MessageRef, envelope
from byref.store import MemoryStore, Scope
from byref.testing import result_text
from byref.tools import Payload, ToolRefusal, tool
from byref.transcript import Part, Transcript

ROWS = [{"id": i, "title": f"row {i}"} for i in range(2_000)]


def make_tools(seen: list[Any]) -> list[Any]:
    @tool
    async def aecho(x: Any) -> str:
        """Receive anything, on the loop."""
        seen.append(x)
        return "ok"

    @tool
    async def abig() -> list[dict[str, Any]]:
        """A result large enough to be placed."""
        return ROWS

    @tool
    async def aexport() -> Payload:
        """A payload, stored and shown as a marker."""
        return Payload.from_bytes(b'{"a": 1}', "application/json", kind="export")

    @tool
    async def arefuse() -> str:
        """Declines in its own words."""
        raise ToolRefusal("not today", "tool-refused")

    @tool
    async def abroken() -> str:
        """Fails."""
        raise KeyError("missing")

    @tool
    async def aodd() -> Any:
        """Returns what cannot be recorded."""
        return {1j}

    @tool
    async def athread() -> int:
        """Where it ran."""
        return threading.get_ident()

    @tool
    def secho(x: Any) -> str:
        """A sync tool."""
        seen.append(x)
        return "ok"

    return [aecho, abig, aexport, arefuse, abroken, aodd, athread, secho]


class Rig:
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.sink = MemorySink()
        self.transcript = Transcript()
        self.dispatcher = Dispatcher(make_tools(self.seen), transcript=self.transcript,
                                     store=MemoryStore(), scope=Scope("async"),
                                     emit=Emitter(self.sink), policy=Policy(
                                         auto_insert_bytes=24_000))

    def _begin(self, name: str, args: Any) -> tuple[Call, int]:
        c = Call(f"c{len(self.transcript)}", name, args)
        return c, self.transcript.append("assistant", [self.dispatcher.call_part(c)]).seq

    def call(self, name: str, args: Any) -> Part:
        c, seq = self._begin(name, args)
        part = self.dispatcher.dispatch(c, call_seq=seq, seq=seq + 1, part=0)
        self.transcript.append("tool", [part])
        return part

    async def acall(self, name: str, args: Any) -> Part:
        c, seq = self._begin(name, args)
        part = await self.dispatcher.adispatch(c, call_seq=seq, seq=seq + 1, part=0)
        self.transcript.append("tool", [part])
        return part


def events(rig: Rig) -> list[tuple[str, Any, Any]]:
    return [(e.name, e.data.get("reason"), e.data.get("op")) for e in rig.sink.events]


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every `anyio.to_thread.run_sync` made, by the name of what it ran."""
    made: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        target = fn.func if isinstance(fn, functools.partial) else fn
        made.append(getattr(target, "__name__", repr(target)))
        return await real(fn, *args, **kw)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    yield made


CASES: list[tuple[str, Any]] = [
    ("aecho", {"x": 1}),
    ("aecho", {"x": {"$ref": {"type": "Message", "seq": 0, "part": 0, "field": "input.x"}}}),
    ("aecho", {"x": {"$ref": {"type": "Message", "seq": 999, "part": 0}}}),
    ("aecho", {"x": {"$ref": {"type": "JsonPointer", "source": {"type": "Blob", "key": "k"},
                              "path": "/0"}}}),
    ("aecho", {"x": {"$rеf": 1}}),
    ("aecho", []),
    ("aecho", {"x": "bad\udcff"}),
    ("aecho", {"y": 1}),
    ("nope", {}),
    ("abig", {}),
    ("aexport", {}),
    ("arefuse", {}),
    ("abroken", {}),
    ("aodd", {}),
    ("secho", {"x": 2}),
]


def test_both_paths_give_the_same_parts_and_events() -> None:
    sync, aio = Rig(), Rig()
    for name, args in CASES:
        expected = sync.call(name, args)
        got = anyio.run(aio.acall, name, args)
        if name == "abig":  # placed: a fresh ref each time, the same shape
            assert msgspec.json.decode(result_text(got))["bytes"] == msgspec.json.decode(
                expected.rendered)["bytes"]
        elif name == "aexport":
            assert got.value["bytes"] == expected.value["bytes"]
        else:
            assert (got.value, got.rendered, got.is_error) == (
                expected.value, expected.rendered, expected.is_error), name
    assert events(aio) == events(sync)
    assert aio.seen == sync.seen


def test_sync_dispatch_without_a_loop_runs_an_async_tool_to_completion() -> None:
    rig = Rig()
    part = rig.call("aecho", {"x": 7})
    assert (part.value, part.is_error, rig.seen) == ("ok", False, [7])


def test_sync_dispatch_inside_a_running_loop_refuses_an_async_tool_clearly() -> None:
    rig = Rig()

    async def inside() -> Part:
        return rig.call("aecho", {"x": 7})

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine left un-awaited would warn
        part = asyncio.run(inside())
    assert part.is_error and rig.seen == []
    assert "is async" in part.rendered and "adispatch" in part.rendered
    assert ("refused", "tool-error", "dispatch") in events(rig)


def test_sync_dispatch_from_a_worker_thread_runs_an_async_tool_on_the_loop() -> None:
    rig = Rig()

    async def main() -> tuple[int, Part]:
        return threading.get_ident(), await anyio.to_thread.run_sync(rig.call, "athread", {})

    loop_thread, part = anyio.run(main)
    assert part.value == loop_thread


def test_a_plain_async_call_makes_no_thread_hop(hops: list[str]) -> None:
    rig = Rig()

    async def main() -> tuple[int, Part]:
        return threading.get_ident(), await rig.acall("athread", {})

    loop_thread, part = anyio.run(main)
    assert part.value == loop_thread
    assert anyio.run(rig.acall, "aecho", {"x": [1, 2]}).value == "ok"
    assert hops == []


def test_only_the_stages_that_may_block_go_to_a_thread(hops: list[str]) -> None:
    rig = Rig()
    first = anyio.run(rig.acall, "aecho", {"x": {"rows": [1]}})
    assert hops == [] and first.value == "ok"
    ref = envelope(MessageRef(part=0, seq=0, field="input.x"))
    assert anyio.run(rig.acall, "aecho", {"x": ref}).value == "ok"
    assert rig.seen[-1] == {"rows": [1]}
    assert hops == ["_prepare"]
    hops.clear()
    placed = anyio.run(rig.acall, "abig", {})
    assert msgspec.json.decode(result_text(placed))["placed"] is True
    assert hops == ["finish"]
    hops.clear()
    assert anyio.run(rig.acall, "aexport", {}).value["opaque"] is True
    assert hops == ["record"]
    hops.clear()
    assert anyio.run(rig.acall, "secho", {"x": 1}).value == "ok"
    assert hops == ["_dispatch"]  # the sync path, told the loop inner calls use


def test_a_defect_in_adispatch_is_an_internal_error_refusal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()

    async def broken(*_: Any, **__: Any) -> Part:
        raise RuntimeError("a bug below dispatch")

    monkeypatch.setattr(rig.dispatcher.recorder.__class__, "arecord", broken)
    part = anyio.run(rig.acall, "aecho", {"x": 1})
    assert part.is_error and "could not process this call (RuntimeError)" in part.rendered
    assert ("refused", "internal-error", "dispatch") in events(rig)


def test_cancelling_adispatch_cancels_the_tool_and_is_not_a_refusal() -> None:
    started, never = anyio.Event(), anyio.Event()

    @tool
    async def wait() -> str:
        """Waits for ever."""
        started.set()
        await never.wait()
        return "done"

    transcript = Transcript()
    dispatcher = Dispatcher([wait], transcript=transcript, store=None, scope=Scope("c"))

    async def main() -> bool:
        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as group:
                async def run() -> None:
                    await dispatcher.adispatch(Call("c1", "wait", {}), call_seq=0, seq=1, part=0)
                    raise AssertionError("adispatch returned after being cancelled")

                group.start_soon(run)
                await started.wait()
                group.cancel_scope.cancel()
        return group.cancel_scope.cancelled_caught

    assert anyio.run(main) is True
