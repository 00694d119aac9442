"""`logging/setLevel` is answered at once, whatever is still starting, and reaches every server
that logs: one that runs at once, one still starting once it is up. Before, the gateway's answer
waited for the slowest server's start (a client that gives up after a few seconds saw it fail).

The slow server waits for a gate file (`fixtures/late.py gate`), so "still starting" is a fact
while the gate is shut; its `level` tool says the level it was last set to."""

from __future__ import annotations

import anyio
import pytest
from _gateway_rig import FIXTURES, World, running, text
from mcp import Client

from _waits import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings(
    "ignore:The logging capability is deprecated")]  # setLevel is the handshake era's

PATIENCE = 4.0
"""Seconds a client waits for an answer before it gives up (Claude Code: ~5 s)."""


async def test_set_level_answers_before_a_slow_server_is_up_and_reaches_it_once_it_is(
        world: World) -> None:
    gate = world.root / "gate"
    late = world.fixture("late.py", timeout=scaled(60)) | {
        "args": [str(FIXTURES / "late.py"), "gate", str(gate)]}
    with anyio.fail_after(scaled(60)):
        async with running(world, {"late": late}) as (_gateway, server), Client(
                server, mode="legacy") as client:
            with anyio.fail_after(PATIENCE):
                await client.set_logging_level("debug")
            assert not gate.exists()  # answered while 'late' could not be up
            gate.touch()
            said = await client.call_tool("call_tool", {"name": "late__level", "arguments": {}})
            assert text(said) == "level debug"
            # Up and running: the next level reaches it before the answer.
            await client.set_logging_level("error")
            said = await client.call_tool("call_tool", {"name": "late__level", "arguments": {}})
            assert text(said) == "level error"
