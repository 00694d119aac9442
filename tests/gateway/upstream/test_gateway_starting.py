"""A call to a tool of a server that is still starting is refused saying so, naming the server,
through call_tool and by the tool's own name, in search and direct mode; the servers that are up
keep answering."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _gateway_rig import FIXTURES, World, running, text
from mcp import Client

from _waits import scaled

pytestmark = pytest.mark.anyio

STARTING = ("'hung__echo' cannot run yet: server 'hung' is still starting (its tools are "
            "announced when it is ready); try again then.")


def _hung(world: World) -> dict[str, Any]:
    # Never answers the handshake; its start is abandoned only after 20 s.
    return world.fixture("crashy.py", timeout=scaled(20)) | {
        "args": [str(FIXTURES / "crashy.py"), "hang", str(world.root / "hung.pids")]}


@pytest.mark.parametrize("mode", ["search", "direct"])
async def test_a_call_to_a_starting_servers_tool_says_it_is_starting(
        world: World, mode: str) -> None:
    servers = {**world.need("time"), "hung": _hung(world)}
    options: dict[str, Any] = {"mode": mode}
    if mode == "direct":
        options["callTool"] = "all"  # so call_tool is declared there too
    with anyio.fail_after(scaled(40)):
        async with running(world, servers, **options) as (gateway, server), Client(
                server) as client:
            gateway.list_grace = 0.2  # a call waits this long for listings in flight, no more
            with anyio.fail_after(scaled(20)):  # the time server is listed on its own
                while "time__get_current_time" not in (await gateway.toolbox()).catalog:
                    await anyio.sleep(0.05)
            assert (await gateway.toolbox()).starting == ("hung",)
            started = anyio.current_time()
            via = await client.call_tool("call_tool", {"name": "hung__echo",
                                                       "arguments": {"text": "hi"}})
            assert via.is_error and text(via) == STARTING
            own = await client.call_tool("hung__echo", {"text": "hi"})
            assert own.is_error and text(own) == STARTING
            assert anyio.current_time() - started < 5  # not the hung server's 20 s
            other = await client.call_tool("hung__nothing_like_it", {})
            assert other.is_error and "still starting" in text(other)  # any name of that server
            # A name of no server is still "unknown", not "starting".
            unknown = await client.call_tool("call_tool", {"name": "nobody__echo"})
            assert unknown.is_error and "still starting" not in text(unknown)
            up = await client.call_tool("call_tool", {"name": "time__get_current_time",
                                                      "arguments": {"timezone": "UTC"}})
            assert not up.is_error and json.loads(text(up))["timezone"] == "UTC"


async def test_a_starting_server_delays_only_the_first_call_not_every_call(
        world: World) -> None:
    servers = {**world.need("time"), "hung": _hung(world)}
    with anyio.fail_after(scaled(40)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            gateway.list_grace = 3.0
            with anyio.fail_after(scaled(20)):  # the time server is listed on its own
                while "time__get_current_time" not in (await gateway.toolbox(wait=0)).catalog:
                    await anyio.sleep(0.05)
            await client.list_tools()  # told 'hung' is starting, at once (search mode)
            await client.call_tool("call_tool", {"name": "hung__echo"})  # waits once
            started = anyio.current_time()
            for _ in range(3):  # then no call waits for it again: 'hung' is announced later
                up = await client.call_tool("call_tool", {"name": "time__get_current_time",
                                                          "arguments": {"timezone": "UTC"}})
                assert not up.is_error
                refused = await client.call_tool("call_tool", {"name": "hung__echo"})
                assert text(refused) == STARTING
            assert anyio.current_time() - started < 3.0  # six calls: less than one grace
