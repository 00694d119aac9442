"""A per-principal upstream process that changes its own tools changes its principal's view alone
(defect 9 of [trust III]: its `notifications/tools/list_changed` was ignored, even for its own
principal, or re-listed into everyone's catalog).

Over HTTP with two tokens, `changing.py` runs one process per principal; Alice's `grow` adds a
tool to hers and announces it: Alice is told and finds the new tool, Bob is not told and does
not, and a later change of Bob's own reaches Bob; once the pool retires their processes, both
see the tools a new one lists.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = pytest.mark.anyio
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef0000"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"}}


class Told:
    """A client's tool-list-changed notices."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self.event.set()

    async def next(self) -> None:
        await self.event.wait()
        self.event = anyio.Event()


def _client(url: str, token: str, told: Told) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), mode="legacy", message_handler=told)


async def _found(c: Client) -> list[str]:
    got = json.loads(text(await c.call_tool("search_tools", {"query": "water the seedling"})))
    return [r["name"] for r in got["results"]]


async def test_an_own_list_change_refreshes_its_principal_alone(world: World) -> None:
    servers = {"garden": world.fixture("changing.py", 20)}
    alice_told, bob_told = Told(), Told()
    with anyio.fail_after(90):
        async with served(world, servers, tokens=TOKENS) as (gateway, url), \
                _client(url, ALICE, alice_told) as alice, _client(url, BOB, bob_told) as bob:
            assert gateway.upstreams["garden"].share == "principal"
            assert await _found(alice) == [] and await _found(bob) == []
            assert text(await alice.call_tool("call_tool", {"name": "garden__grow"})) == (
                "now 2 tools")
            await alice_told.next()
            assert await _found(alice) == ["garden__water_seedling_1"]
            assert await _found(bob) == []
            assert bob_told.count == 0

            assert text(await bob.call_tool("call_tool", {"name": "garden__grow"})) == (
                "now 2 tools")
            await bob_told.next()
            assert await _found(bob) == ["garden__water_seedling_1"]
            assert text(await bob.call_tool("call_tool", {"name": "garden__grow"})) == (
                "now 3 tools")
            await bob_told.next()
            assert sorted(await _found(bob)) == ["garden__water_seedling_1",
                                                 "garden__water_seedling_2"]
            assert await _found(alice) == ["garden__water_seedling_1"]

            # Idle instances retired: a new process lists as started, and so does the view.
            pool = gateway.upstreams.pool
            pool.clock = lambda: time.monotonic() + pool.idle + 1
            assert await pool.sweep() >= 2  # theirs, and the one the catalog was listed on
            assert await _found(alice) == [] and await _found(bob) == []
