"""`"share": "tenant"`: one process for a tenant's principals, so what it sends after one
principal's call returned reaches whatever call of that tenant is then in flight on it — as the
docs say of `"all"` — and never another tenant's (whose process is its own).

Real processes: `fixtures/hostile.py` over stdio, three clients over HTTP (two principals of one
tenant, one of another).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from _gateway_rig import World, text
from mcp import Client
from test_gateway_tenancy import ALICE, BOB, MALLORY, Seen, call, client, serving, until

from _waits import scaled

pytestmark = pytest.mark.anyio
DOCS = Path(__file__).parents[3] / "docs" / "TEAM.md"


async def test_a_tenant_shared_servers_later_traffic_stays_in_its_tenant(
        world: World, tmp_path: Path) -> None:
    entry = world.fixture("hostile.py", 20, share="tenant")
    alice_seen, bob_seen, mallory_seen = Seen(), Seen(), Seen()
    d = str(tmp_path)
    with anyio.fail_after(scaled(120)):
        async with serving(world, {"h": entry}) as (gateway, url), client(
                url, ALICE, **alice_seen.options("legacy")) as alice, client(
                url, BOB, **bob_seen.options("legacy")) as bob, client(
                url, MALLORY, **mallory_seen.options("legacy")) as mallory:
            armed = text(await call(alice, "h__arm", dir=d))  # Alice's call returns at once
            assert armed.startswith("armed pid")
            done: list[str] = []

            async def block(c: Client) -> None:
                done.append(text(await call(c, "h__block", dir=d)))

            async with anyio.create_task_group() as group:
                group.start_soon(block, bob)
                group.start_soon(block, mallory)
                await until(lambda: gateway.upstreams["h"].in_flight == 2)
                instances = gateway.upstreams["h"].instances
                assert sorted(instances) == [("acme",), ("evil",)]
                (tmp_path / "go").touch()
                await until((tmp_path / "sent.json").exists)
                (tmp_path / "release").touch()
            assert done == ["released"] * 2
    # What Alice's process sent after her call reached Bob's call in flight (documented), and
    # nothing reached the other tenant.
    assert mallory_seen.got == [] and alice_seen.got == []
    assert "sampling: type='text' text='hostile secret prompt' annotations=None meta=None" in (
        bob_seen.got)
    said = " ".join(DOCS.read_text().split())
    assert ("Mark a server `\"all\"` or `\"tenant\"` only when it keeps nothing about its client"
            in said), "TEAM.md must say what `tenant` shares"
    assert ("what it sends after a call returned reaches whatever call is then in flight on it "
            "(under `\"tenant\"`, any call of that tenant's)") in said
