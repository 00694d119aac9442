"""An upstream that crashes mid-call, hangs, or writes malformed JSON-RPC yields a clear error
naming the server, and the gateway keeps serving the other servers (and restarts the bad one)."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from _gateway_rig import World, running, text
from mcp import Client

pytestmark = pytest.mark.anyio


async def _echo(client: Client) -> str:
    result = await client.call_tool("call_tool", {"name": "bad__echo",
                                                  "arguments": {"text": "still here"}})
    assert not result.is_error, text(result)
    return text(result)


async def _time_still_served(client: Client) -> None:
    result = await client.call_tool("call_tool", {"name": "time__get_current_time",
                                                  "arguments": {"timezone": "UTC"}})
    assert not result.is_error, text(result)
    assert json.loads(text(result))["timezone"] == "UTC"


async def test_a_crash_mid_call_is_a_clear_error_and_the_server_is_restarted(
        world: World) -> None:
    servers = {**world.need("time"), "bad": world.fixture("misbehaving.py")}
    with anyio.fail_after(60):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            first = await _echo(client)
            crashed = await client.call_tool("call_tool", {"name": "bad__crash"})
            assert crashed.is_error
            assert text(crashed) == (
                "Server 'bad' stopped while running 'crash': its connection closed (Connection "
                "closed). It will be started again on the next call.")
            await _time_still_served(client)
            second = await _echo(client)
            assert first.split(":")[0] != second.split(":")[0]  # a new process answered
            assert gateway.upstreams["bad"].starts == 2
    assert "misbehaving: crashing on purpose" in world.log.read_text()


async def test_a_hang_times_out_with_the_server_named_while_others_are_served(
        world: World) -> None:
    servers = {**world.need("time"), "bad": world.fixture("misbehaving.py", timeout=2)}
    with anyio.fail_after(60):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            await client.list_tools()
            outcome: list[str] = []
            async with anyio.create_task_group() as group:

                async def hang() -> None:
                    result = await client.call_tool("call_tool", {"name": "bad__hang"})
                    assert result.is_error
                    outcome.append(text(result))

                group.start_soon(hang)
                await _time_still_served(client)  # answered while the hang is in flight
                assert outcome == []
            assert outcome == [
                "Server 'bad' did not finish running 'hang' within 2 s."]
            await _echo(client)  # it still answers pings, so its connection was kept
            assert gateway.upstreams["bad"].starts == 1


async def test_malformed_json_rpc_is_a_clear_error_and_the_server_is_restarted(
        world: World) -> None:
    servers = {**world.need("time"), "bad": world.fixture("misbehaving.py", timeout=30)}
    with anyio.fail_after(20):  # well under the upstream timeout: the fault is seen at once
        async with running(world, servers) as (gateway, server), Client(server) as client:
            garbled = await client.call_tool("call_tool", {"name": "bad__garble"})
            assert garbled.is_error
            assert text(garbled).startswith(
                "Server 'bad' failed while running 'garble': it sent a message that is not "
                "valid JSON-RPC (")
            assert text(garbled).endswith("). It will be started again on the next call.")
            await _time_still_served(client)
            await _echo(client)
            assert gateway.upstreams["bad"].starts == 2


async def test_a_server_that_cannot_start_is_reported_and_the_rest_are_served(
        world: World) -> None:
    servers = {**world.need("time"), "ghost": {"command": str(world.root / "no-such-server")},
               "mute": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"],
                        "timeout": 1}}
    with anyio.fail_after(30):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            listed = await client.list_tools()
            search = next(t for t in listed.tools if t.name == "search_tools")
            assert (f"Server 'ghost' could not be started: the command "
                    f"{str(world.root / 'no-such-server')!r} was not found."
                    ) in (search.description or "")
            assert ("Server 'mute' could not be started: it did not complete the MCP handshake "
                    "within 1 s.") in (search.description or "")
            await _time_still_served(client)
            box = await gateway.toolbox()
            assert box.unavailable.keys() == {"ghost", "mute"}
