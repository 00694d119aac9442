"""Replicas hear each other's tool-list changes (PostgreSQL LISTEN/NOTIFY): three
`byref gateway --transport http` processes on one PostgreSQL state, each with its own copy of an
upstream whose tool list lives in a shared file. A tool call on the first replica changes the
list and only that replica's upstream says so; clients listening on the second and third are
told, and those replicas have re-listed their own upstream (the new tool runs there). An
activation on one replica changes the principal's shared working set: another replica re-reads
the record, and a handshake-era client of that principal there is declared the tool (replicas
serve HTTP statelessly, so no notice reaches it; a 2026-07-28 client's list never changes with
activations)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from _gateway_rig import World, text
from test_gateway_replicas import TOKENS, client, replicas

from _waits import scaled

pytestmark = pytest.mark.anyio

TOKEN = next(iter(TOKENS))
NEW = "shared__prune_hedge_0"


def _config(world: World, state: str, tools: Path) -> Path:
    config = world.root / "lists.json"
    config.write_text(json.dumps({
        "mcpServers": {"shared": world.fixture("shared_list.py", env={
            "SHARED_TOOLS": str(tools)})},
        "byref": {"tokens": TOKENS, "replicas": True, "state": state,
                  "store": f"file://{world.root / 'store'}"}}))
    return config


async def test_a_list_change_on_one_replica_reaches_the_others(
        world: World, postgres_state: str) -> None:
    config = _config(world, postgres_state, world.root / "tools.json")
    with world.log.open("a") as log, replicas(config, log, 3) as (_, ports):
        a, b, c = (f"http://127.0.0.1:{p}/mcp" for p in ports)
        with anyio.fail_after(scaled(60)):
            async with client(a, TOKEN) as on_a, client(b, TOKEN) as on_b, \
                    client(c, TOKEN) as on_c:
                for other in (on_b, on_c):  # each indexed the list before the change
                    before = await other.call_tool("call_tool", {"name": NEW})
                    assert before.is_error, text(before)
                async with on_b.listen(tools_list_changed=True) as heard_b, \
                        on_c.listen(tools_list_changed=True) as heard_c:
                    grown = await on_a.call_tool("call_tool", {"name": "shared__grow"})
                    assert not grown.is_error, text(grown)
                    for heard in (heard_b, heard_c):
                        event = await heard.__anext__()
                        assert type(event).__name__ == "ToolsListChanged"
                for other in (on_b, on_c):  # re-listed from its own upstream
                    ran = await other.call_tool("call_tool", {"name": NEW})
                    assert not ran.is_error, text(ran)
                    assert text(ran) == f"pruned by {NEW.removeprefix('shared__')}"


async def test_an_activation_on_one_replica_is_declared_on_another(
        world: World, postgres_state: str) -> None:
    config = _config(world, postgres_state, world.root / "tools.json")
    with world.log.open("a") as log, replicas(config, log, 2) as (_, ports):
        a, b = (f"http://127.0.0.1:{p}/mcp" for p in ports)
        with anyio.fail_after(scaled(60)):
            async with client(a, TOKEN) as on_a, client(b, TOKEN, mode="legacy") as on_b:
                # B indexes its catalog first (a call waits for it; a list would not).
                await on_b.call_tool("search_tools", {"query": "grow"})
                assert "shared__grow" not in {t.name for t in (await on_b.list_tools()).tools}
                got = await on_a.call_tool("activate_tool", {"names": ["shared__grow"]})
                assert not got.is_error, text(got)
                # B hears of it on PostgreSQL and re-reads the record (nothing a client sees
                # marks the moment: B's list is asked until it declares the tool).
                while "shared__grow" not in {t.name for t in (await on_b.list_tools()).tools}:
                    await anyio.sleep(0.05)
