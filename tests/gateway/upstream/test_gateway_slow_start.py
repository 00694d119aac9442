"""A server slow to start never holds up a client's first lists: tools/list (search mode: at once;
direct mode: what is ready within a second), resources/list and prompts/list are answered while
it is still starting, and its arrival is announced by a list change — one per settled change, in
both protocol generations, however many servers arrive together.

Claude Code cancels a tools/list after ~5 s and then shows "tools fetch failed" for the whole
gateway; `PATIENCE` is that client's patience, less a margin. The slow servers here wait for a
gate file (`fixtures/late.py gate`), so "still starting" is a fact while the gate is shut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running
from mcp import Client

from _waits import scaled

pytestmark = pytest.mark.anyio

PATIENCE = 4.0
"""Seconds a client waits for a list before it gives up (Claude Code: ~5 s)."""
SCAFFOLDING = ["activate_tool", "call_tool", "present", "read_result", "search_tools"]


def _late(world: World, gate: Path) -> dict[str, Any]:
    return world.fixture("late.py", timeout=scaled(60)) | {
        "args": [str(FIXTURES / "late.py"), "gate", str(gate)]}


class Heard:
    """List-change notices a client hears, by kind, on either generation's channel."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.changed = anyio.Event()

    def note(self, kind: str) -> None:
        self.kinds.append(kind)
        self.changed.set()

    async def on_message(self, message: Any) -> None:
        for cls, kind in ((types.ToolListChangedNotification, "tools"),
                          (types.ResourceListChangedNotification, "resources"),
                          (types.PromptListChangedNotification, "prompts")):
            if isinstance(message, cls):
                self.note(kind)

    async def wait(self) -> None:
        await self.changed.wait()
        self.changed = anyio.Event()


@pytest.mark.parametrize("mode", ["search", "direct"])
async def test_tools_list_is_answered_before_a_slow_server_is_up(world: World, mode: str
                                                                 ) -> None:
    gate = world.root / "gate"
    heard = Heard()
    with anyio.fail_after(scaled(60)):
        async with running(world, {"late": _late(world, gate)}, mode=mode) as (
                _gateway, server), Client(server, mode="legacy",
                                          message_handler=heard.on_message) as client:
            with anyio.fail_after(PATIENCE):
                first = [t.name for t in (await client.list_tools()).tools]
            assert not gate.exists()  # answered while 'late' could not be up
            assert "late__brew" not in first
            if mode == "search":
                assert sorted(first) == SCAFFOLDING
            gate.touch()
            await heard.wait()  # its arrival is announced
            assert heard.kinds == ["tools"]
            names = [t.name for t in (await client.list_tools()).tools]
            assert ("late__brew" in names) is (mode == "direct")
            if mode == "search":  # declared nothing new, but search finds it now
                found = await client.call_tool("search_tools", {"query": "brew a pot of tea"})
                assert "late__brew" in found.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("generation", ["legacy", "2026-07-28"])
async def test_servers_arriving_together_are_announced_once(world: World, generation: str
                                                            ) -> None:
    gate = world.root / "gate"
    servers = {name: _late(world, gate) for name in ("oolong", "sencha", "assam")}
    heard = Heard()
    with anyio.fail_after(scaled(60)):
        async with running(world, servers, mode="direct") as (gateway, server), Client(
                server, mode="legacy" if generation == "legacy" else "auto",
                message_handler=heard.on_message) as client:
            gateway.list_grace = 0.5  # (a list's wait is not what this test is about)
            with anyio.fail_after(PATIENCE):
                first = {t.name for t in (await client.list_tools()).tools}
            assert not gate.exists()
            assert not {"oolong__brew", "sencha__brew", "assam__brew"} & first
            if generation == "legacy":
                gate.touch()
                await heard.wait()
            else:
                assert client.protocol_version == "2026-07-28"
                async with client.listen(tools_list_changed=True) as subscription:
                    gate.touch()
                    event = await subscription.__anext__()  # (the client tees it to `heard`)
                    assert type(event).__name__ == "ToolsListChanged"
            # The first notice covers all three: nothing is left to announce (what was sent
            # before the list's answer has arrived before it).
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"oolong__brew", "sencha__brew", "assam__brew"} <= names
            assert heard.kinds == ["tools"]


async def test_resource_and_prompt_lists_do_not_wait_for_a_slow_server(world: World) -> None:
    gate = world.root / "gate"
    heard = Heard()
    with anyio.fail_after(scaled(60)):
        async with running(world, {"late": _late(world, gate)}) as (_gateway, server), Client(
                server, mode="legacy", message_handler=heard.on_message) as client:
            with anyio.fail_after(PATIENCE):
                resources = (await client.list_resources()).resources
            with anyio.fail_after(PATIENCE):
                prompts = (await client.list_prompts()).prompts
            with anyio.fail_after(PATIENCE):
                templates = (await client.list_resource_templates()).resource_templates
            assert not gate.exists()
            assert not [r for r in resources if "menu" in str(r.uri)]
            assert prompts == []
            assert [t.name for t in templates] == ["byref artifact"] or all(
                "late" not in str(t.uri_template) for t in templates)
            gate.touch()
            while not {"resources", "prompts"} <= set(heard.kinds):
                await heard.wait()
            assert [r.name for r in (await client.list_resources()).resources
                    if "menu" in str(r.uri)] == ["menu"]
            assert [p.name for p in (await client.list_prompts()).prompts] == ["late__tasting"]
