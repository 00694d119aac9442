"""`Session.run_call`: one call as a turn of its own — the gateway's call sequence.

An exclusive call's result lands right after its call, whatever else is recorded meanwhile; a
non-exclusive call's messages wait only while an exclusive call holds the lock; `run=` records
the call as written and runs another; a shared record that moved on re-runs the call."""

from __future__ import annotations

import asyncio
from typing import Any

import byref
from byref.dispatch import Call
from byref.dispatch.hooks import Hooks
from byref.harness import Hosting
from byref.transcript import Part, Transcript


def _messages(transcript: Transcript) -> list[Any]:
    return list(transcript)


def _roles(transcript: Transcript) -> list[tuple[str, str | None]]:
    return [(m.role, m.parts[0].tool) for m in _messages(transcript)]


def _exclusive_while_another_waits(transcript: Transcript) -> None:
    """An exclusive call that waits on a gate, and a non-exclusive one started meanwhile: the
    second's first append waits until the first call's result is recorded."""
    gate = asyncio.Event()

    @byref.tool
    async def slow() -> str:
        """Waits for the gate."""
        await gate.wait()
        return "slow done"

    @byref.tool
    def quick() -> str:
        """Returns at once."""
        return "quick done"

    async def scenario() -> None:
        session = byref.Session([slow, quick], transcript=transcript)
        exclusive = asyncio.create_task(session.run_call(Call("c1", "slow", {})))
        while not session.lock.locked():  # bounded: the task takes the lock on its first step
            await asyncio.sleep(0)
        other = asyncio.create_task(session.run_call(Call("c2", "quick", {}), exclusive=False))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not other.done()  # its first append waits while the exclusive call runs
        gate.set()
        first, second = await asyncio.wait_for(asyncio.gather(exclusive, other), 5)
        assert (first.value, second.value) == ("slow done", "quick done")

    asyncio.run(scenario())
    assert _roles(transcript) == [("assistant", "slow"), ("tool", "slow"),
                                  ("assistant", "quick"), ("tool", "quick")]


def test_an_exclusive_call_keeps_its_result_next_to_it_while_others_record() -> None:
    _exclusive_while_another_waits(Transcript())


def test_non_exclusive_calls_interleave_and_each_result_names_its_call() -> None:
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    @byref.tool
    async def wait_for(name: str) -> str:
        """Waits for gate `name`."""
        await gates[name].wait()
        return name

    async def scenario() -> list[Part]:
        session = byref.Session([wait_for])
        a = asyncio.create_task(session.run_call(Call("ca", "wait_for", {"name": "a"}),
                                                 exclusive=False))
        b = asyncio.create_task(session.run_call(Call("cb", "wait_for", {"name": "b"}),
                                                 exclusive=False))
        for _ in range(20):
            await asyncio.sleep(0)
        gates["b"].set()
        await asyncio.wait_for(b, 5)
        gates["a"].set()
        await asyncio.wait_for(a, 5)
        return [m.parts[0] for m in _messages(session.transcript)]

    parts = asyncio.run(scenario())
    assert [(p.type, p.call_id) for p in parts] == [
        ("tool_call", "ca"), ("tool_call", "cb"), ("tool_result", "cb"), ("tool_result", "ca")]


def test_run_records_the_call_as_written_and_runs_the_named_tool() -> None:
    @byref.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    session = byref.Session([echo])
    wrapper = Call("c1", "call_tool", {"name": "echo", "arguments": {"text": "hi"}})
    part = asyncio.run(session.run_call(wrapper, run=Call("c1", "echo", {"text": "hi"})))
    call, result = (m.parts[0] for m in _messages(session.transcript))
    assert call.tool == "call_tool" and call.value["input"]["name"] == "echo"
    assert result is not None and part.value == "hi" and result.value == "hi"


def test_the_unknown_tool_hint_replaces_the_usual_refusal_only_when_it_speaks() -> None:
    def starting(name: str) -> str | None:
        return (f"{name!r} cannot run yet: its server is starting." if name.startswith("s__")
                else None)

    session = byref.Session([], hosting=Hosting(hooks=Hooks(unknown_tool=starting)))
    starting = asyncio.run(session.run_call(Call("c1", "s__echo", {})))
    unknown = asyncio.run(session.run_call(Call("c2", "nope", {})))
    assert starting.is_error and starting.value.endswith(
        "'s__echo' cannot run yet: its server is starting.")
    assert unknown.is_error and "There is no tool 'nope'" in unknown.value


class _MovingTranscript(Transcript):
    """A record another writer appends to once, right after this session's first call."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = False

    def append(self, role: Any, parts: Any) -> Any:
        message = super().append(role, parts)
        if role == "assistant" and not self.moved:
            self.moved = True
            super().append("user", [Part(type="text", value="another writer")])
        return message


def test_an_exclusive_call_runs_again_when_the_record_moved_past_its_result() -> None:
    runs: list[int] = []

    @byref.tool
    def count() -> int:
        """Counts its runs."""
        runs.append(1)
        return len(runs)

    session = byref.Session([count], transcript=_MovingTranscript())
    part = asyncio.run(session.run_call(Call("c1", "count", {}), tries=3))
    roles = [m.role for m in _messages(session.transcript)]
    assert runs == [1, 1] and part.value == 2
    assert roles == ["assistant", "user", "assistant", "tool"]


def test_append_at_writes_only_at_the_named_seq() -> None:
    transcript = Transcript()
    first = transcript.append("user", [Part(type="text", value="a")])
    assert transcript.append_at(first.seq, "user", [Part(type="text", value="late")]) is None
    landed = transcript.append_at(first.seq + 1, "user", [Part(type="text", value="b")])
    assert landed is not None and [m.parts[0].value for m in _messages(transcript)] == ["a", "b"]


class _SharedTranscript(Transcript):
    """A record whose appends wait on shared storage: each one notes the thread it ran in."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    @property
    def appends_wait(self) -> bool:
        return True

    def append(self, role: Any, parts: Any) -> Any:
        import threading

        self.threads.append(threading.get_ident())
        return super().append(role, parts)


def test_appends_that_wait_on_shared_storage_run_off_the_loop_in_the_same_order() -> None:
    import threading

    transcript = _SharedTranscript()
    _exclusive_while_another_waits(transcript)
    assert transcript.threads and threading.get_ident() not in transcript.threads
