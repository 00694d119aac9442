"""The gateway's hot path: a proxied call awaits its upstream on the event loop (no thread round
trip unless a ref must be read), computes the working set once, and never walks the whole
transcript — so its cost does not grow with the session."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from _gateway_rig import World, running, text
from mcp import Client

import byref.gateway.core as core
from _waits import scaled
from byref.discovery.declaring.workingset import Projection
from byref.transcript import Transcript

pytestmark = pytest.mark.anyio
ECHO = "flaky__echo"


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every `anyio.to_thread.run_sync` made, by the name of what it ran."""
    made: list[str] = []
    real = anyio.to_thread.run_sync

    async def counting(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        target = fn.func if isinstance(fn, functools.partial) else fn
        made.append(getattr(target, "__name__", repr(target)))
        return await real(fn, *args, **kw)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    return made


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many times anything iterated a whole transcript."""
    made: list[int] = []
    real = Transcript.__iter__

    def counting(self: Transcript) -> Iterator[Any]:
        made.append(len(self))
        return real(self)

    monkeypatch.setattr(Transcript, "__iter__", counting)
    yield made


async def test_a_proxied_call_makes_no_thread_hop_and_walks_no_transcript(
        world: World, hops: list[str], walks: list[int]) -> None:
    servers = {"flaky": world.fixture("misbehaving.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools grow by activation
            activated = await client.call_tool("activate_tool", {"names": [ECHO]})
            assert not activated.is_error, text(activated)
            await client.list_tools()
            hops.clear()
            for n in range(200):
                result = await client.call_tool(ECHO, {"text": f"hi {n}"})
                assert not result.is_error and f"hi {n}" in text(result)
            got = await client.call_tool("call_tool", {"name": ECHO,
                                                       "arguments": {"text": "via"}})
            assert not got.is_error, text(got)
            assert ECHO in {t.name for t in (await client.list_tools()).tools}
    assert hops == []
    assert walks == []


async def test_a_proxied_call_with_a_ref_reads_it_in_one_hop(world: World,
                                                              hops: list[str]) -> None:
    servers = {"flaky": world.fixture("misbehaving.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            first = await client.call_tool(ECHO, {"text": "original words"})
            assert not first.is_error, text(first)
            state = gateway.scopes.state(gateway.scopes.stdio_scope)
            seq = state.transcript.last_seq
            assert seq is not None
            hops.clear()
            again = await client.call_tool(ECHO, {"text": {"$ref": {
                "type": "Message", "seq": seq, "part": 0}}})
            assert not again.is_error, text(again)
            assert "original words" in text(again)
    assert hops == ["delivered"]


async def test_the_working_set_is_computed_once_a_call_and_changes_are_announced(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[tuple[str, ...]] = []
    real = core.working_set

    def counting(*args: Any, **kw: Any) -> list[str]:
        out = real(*args, **kw)
        computed.append(tuple(out))
        return out

    monkeypatch.setattr(core, "working_set", counting)
    notices = Notices()
    servers = {"flaky": world.fixture("misbehaving.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(
                server, mode="legacy", message_handler=notices.on_message) as client:
            await client.list_tools()
            assert not (await client.call_tool(ECHO, {"text": "x"})).is_error
            await notices.wait_for(1)  # a direct call keeps a catalog tool warm: declared now
            for _ in range(4):
                assert not (await client.call_tool(ECHO, {"text": "x"})).is_error
            assert len(computed) == 5
            await client.call_tool("activate_tool", {"names": ["flaky__crash"]})
            assert len(computed) == 6
            await notices.wait_for(2)
            state = gateway.scopes.state(gateway.scopes.stdio_scope)
            assert state.declared == ("flaky__crash", ECHO)
            log = Projection.of(state.transcript)._log
            assert len(log) <= 3  # echo, activate_tool, crash: the names, not the calls



class Notices:
    """Tool-list-changed notices as they arrive; `wait_for` is bounded."""

    def __init__(self) -> None:
        self.seen = 0
        self._arrived = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.seen += 1
            self._arrived.set()

    async def wait_for(self, count: int) -> None:
        with anyio.fail_after(scaled(10)):
            while self.seen < count:
                await self._arrived.wait()
                self._arrived = anyio.Event()
        assert self.seen == count
