"""The pool's caps hold under concurrent first calls: live plus starting processes never exceed
`maxProcesses` nor `maxPerTenant` (a slot is reserved before the spawn, under a lock).

Real processes: ten principals in two tenants call a blocking tool of `fixtures/hostile.py` at
once over HTTP; while the admitted calls are held, the processes the gateway started are counted
from /proc (its children running the fixture).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import World, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = pytest.mark.anyio
TOKENS = {f"token-{i:02d}-0123456789abcdef": {"tenant": "acme" if i < 6 else "evil",
                                               "principal": f"p{i}"} for i in range(10)}


def _children(script: str) -> set[int]:
    """This process's children running `script` now."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and script.encode() in cmdline:
            found.add(int(entry))
    return found


async def until(check: Any) -> None:
    """Wait (bounded by the test's deadline) until `check()` holds."""
    while not check():
        await anyio.sleep(0.01)


async def test_concurrent_first_calls_never_overshoot_either_cap(
        world: World, tmp_path: Path) -> None:
    entry = world.fixture("hostile.py", 20)
    outcomes: dict[str, str] = {}
    with anyio.fail_after(120):
        async with served(world, {"h": entry}, tokens=TOKENS,
                          pool={"maxProcesses": 3, "maxPerTenant": 2}) as (gateway, url):
            pool = gateway.upstreams.pool

            async def first_call(token: str) -> None:
                async with Client(streamable_http_client(url, http_client=create_mcp_http_client(
                        headers={"Authorization": f"Bearer {token}"}))) as c:
                    done = await c.call_tool("call_tool", {"name": "h__block",
                                                           "arguments": {"dir": str(tmp_path)}})
                    outcomes[token] = text(done)

            async with anyio.create_task_group() as group:
                for token in TOKENS:
                    group.start_soon(first_call, token)
                # Every call is either refused or held in its process.
                await until(lambda: len(outcomes) + gateway.upstreams["h"].in_flight == 10)
                live = _children("hostile.py")
                peak_live, peak_pool = len(live), pool.live
                tenants = [k[0] for (_, k) in pool.pids()]
                (tmp_path / "release").touch()
            refusals = [o for o in outcomes.values() if "was not started" in o]
            said = sorted({int(n) for o in refusals
                           for n in re.findall(r"already runs (\d+)", o)})
            assert (peak_live, peak_pool) == (3, 3), (live, outcomes)
            assert max(tenants.count("acme"), tenants.count("evil")) <= 2, tenants
            assert len(refusals) == 7 and said and max(said) <= 3, refusals
            assert sorted(o for o in outcomes.values() if o == "released") == ["released"] * 3
