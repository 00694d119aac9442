"""The harness on an event loop: `await run(...)`, async and sync tools, one turn's calls
concurrent with results in call order, streaming to a callback, and blocking models."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import byref
from _waits import scaled
from byref.harness import Harness, Limits, ScriptedModel, call, say
from byref.harness.messages import Block, Delta, Request, Response, TextDelta, ToolCallDelta
from byref.testing import result_text
from byref.transcript import Message, Transcript


def calls(*pairs: tuple[str, dict[str, Any]]) -> Response:
    """One model turn that calls several tools at once."""
    return Response(tuple(Block("tool_use", id=f"c{i}", name=name, input=args)
                          for i, (name, args) in enumerate(pairs)))


def test_twenty_async_tool_calls_of_one_turn_overlap_and_are_recorded_in_call_order() -> None:
    started: list[int] = []
    everyone = asyncio.Event()

    @byref.tool
    async def slow(i: int) -> int:
        """Wait until every call of the turn has started, then answer."""
        started.append(i)
        if len(started) == 20:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), timeout=scaled(10))  # one at a time would time out
        return i * i

    script = ScriptedModel([calls(*[("slow", {"i": i}) for i in range(20)]), say("done")])
    run = asyncio.run(Harness(script, [slow]).run("go"))
    assert run.text == "done" and len(started) == 20
    [results] = [m for m in run.transcript if m.role == "tool"]
    assert [p.call_id for p in results.parts] == [f"c{i}" for i in range(20)]
    assert [p.value for p in results.parts] == [i * i for i in range(20)]


def test_a_sync_tool_runs_in_a_worker_thread_so_the_loop_stays_free() -> None:
    where: list[int] = []

    @byref.tool
    def blocking(x: int) -> int:
        """A tool that blocks (files, a database)."""
        where.append(threading.get_ident())
        return x + 1

    async def main() -> tuple[int, Any]:
        h = Harness(ScriptedModel([call("blocking", {"x": 1}), say("ok")]), [blocking])
        return threading.get_ident(), await h.run("go")

    loop_thread, run = asyncio.run(main())
    assert run.text == "ok" and where and where[0] != loop_thread


def test_run_sync_inside_a_running_loop_says_to_await() -> None:
    h = Harness(ScriptedModel([say("hi")]), [])

    async def main() -> None:
        h.run_sync("go")

    with pytest.raises(byref.errors.InvalidValue) as caught:
        asyncio.run(main())
    assert str(caught.value) == ("harness.run_sync(...) cannot run inside a running event "
                                 "loop; use await harness.run(...).")
    assert isinstance(caught.value, ValueError)


def test_the_scripted_model_streams_its_steps_to_the_callback() -> None:
    got: list[Delta] = []
    script = ScriptedModel([
        Response((Block("text", text="Let me look."),
                  Block("tool_use", id="t1", name="echo", input={"text": "hi"}))),
        say("bye")])

    @byref.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    run = Harness(script, [echo], on_delta=got.append).run_sync("go")
    assert run.text == "bye"
    assert got == [TextDelta("Let me look."),
                   ToolCallDelta(0, id="t1", name="echo", arguments='{"text":"hi"}'),
                   TextDelta("bye")]


class Blocking:
    """A model with a blocking `respond` (the pre-async port): still accepted."""

    def __init__(self) -> None:
        self.inner = ScriptedModel([call("echo", {"text": "x"}), say("fine")])
        self.threads: list[int] = []

    def respond(self, request: Request) -> Response:
        self.threads.append(threading.get_ident())
        return self.inner.play(request)


def test_a_blocking_model_runs_off_the_loop_and_its_turns_still_reach_the_callback() -> None:
    @byref.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    model = Blocking()
    got: list[Delta] = []

    async def main() -> tuple[int, Any]:
        return threading.get_ident(), await Harness(model, [echo]).run("go", on_delta=got.append)

    loop_thread, run = asyncio.run(main())
    assert run.text == "fine" and model.threads and loop_thread not in model.threads
    assert got[-1] == TextDelta("fine") and isinstance(got[0], ToolCallDelta)


class Counting(Transcript):
    """A transcript that counts how often recorded messages are read back."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def message(self, seq: int) -> Message:
        self.reads += 1
        return super().message(seq)

    def __iter__(self) -> Any:
        self.reads += len(self)
        return super().__iter__()


@pytest.mark.parametrize("budget", [None, 1_000_000], ids=["unbudgeted", "budgeted"])
def test_each_turn_renders_only_the_messages_new_since_the_last(budget: int | None) -> None:
    @byref.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    transcript = Counting()
    turns = 12
    script = ScriptedModel([*[call("echo", {"text": str(i)}) for i in range(turns)], say("end")])
    run = Harness(script, [echo], transcript=transcript,
                  limits=Limits(budget=budget)).run_sync("go")
    assert run.steps == turns + 1 and len(transcript) == 1 + 2 * turns + 1
    # Each message is read once when first rendered (the last assistant turn never is):
    # re-rendering the whole transcript each turn would read ~n²/2 = 300 messages.
    assert transcript.reads == len(transcript) - 1
    assert [result_text(b.text) for b in run.requests[-1].messages[-1].content] == [
        str(turns - 1)]
