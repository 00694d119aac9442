"""An upstream that crashes mid-call, hangs, or writes malformed JSON-RPC yields a clear error
naming the server, and the gateway keeps serving the other servers (and restarts the bad one)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running, text
from mcp import Client, StdioServerParameters

from _waits import scaled
from byref.gateway import Gateway
from byref.gateway.config.file import parse_config
from byref.store.port import StoreUnavailableError

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
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            first = await _echo(client)
            crashed = await client.call_tool("call_tool", {"name": "bad__crash"})
            assert crashed.is_error
            # The client is told the class; the server's own words are the operator's.
            assert text(crashed) == (
                "Server 'bad' stopped while running 'crash': it exited with code 3. It will be "
                "started again on the next call.")
            await _time_still_served(client)
            second = await _echo(client)
            assert first.split(":")[0] != second.split(":")[0]  # a new process answered
            assert gateway.upstreams["bad"].starts == 2
    assert "misbehaving: crashing on purpose" in world.log.read_text()


async def test_a_hang_times_out_with_the_server_named_while_others_are_served(
        world: World) -> None:
    servers = {**world.need("time"), "bad": world.fixture("misbehaving.py", timeout=2)}
    with anyio.fail_after(scaled(60)):
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
    servers = {**world.need("time"), "bad": world.fixture("misbehaving.py", timeout=scaled(30))}
    with anyio.fail_after(scaled(20)):  # well under the upstream timeout: the fault is seen at once
        async with running(world, servers) as (gateway, server), Client(server) as client:
            garbled = await client.call_tool("call_tool", {"name": "bad__garble"})
            assert garbled.is_error
            assert text(garbled) == (
                "Server 'bad' failed while running 'garble': it sent a message that is not "
                "valid JSON-RPC. It will be started again on the next call.")
            await _time_still_served(client)
            await _echo(client)
            assert gateway.upstreams["bad"].starts == 2


async def test_a_server_that_cannot_start_is_reported_and_the_rest_are_served(
        world: World) -> None:
    servers = {**world.need("time"), "ghost": {"command": str(world.root / "no-such-server")},
               "mute": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"],
                        "timeout": 1}}
    with anyio.fail_after(scaled(30)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            await gateway.toolbox()  # listed (a first list does not wait for servers starting)
            listed = await client.list_tools()
            search = next(t for t in listed.tools if t.name == "search_tools")
            assert ("Server 'ghost' could not be started: its command was not found."
                    ) in (search.description or "")
            assert gateway.failures["ghost"] == (  # the operator's words name the command
                f"Server 'ghost' could not be started: the command "
                f"{str(world.root / 'no-such-server')!r} was not found.")
            assert ("Server 'mute' could not be started: it did not complete the MCP handshake "
                    "within 1 s.") in (search.description or "")
            await _time_still_served(client)
            box = await gateway.toolbox()
            assert box.unavailable.keys() == {"ghost", "mute"}


def _crashy(world: World, mode: str, arg: str = "", timeout: float = 5) -> dict[str, Any]:
    return world.fixture("crashy.py", timeout=timeout) | {
        "args": [str(FIXTURES / "crashy.py"), mode, *([arg] if arg else [])]}


def _pids(path: Path) -> list[int]:
    return [int(p) for line in path.read_text().splitlines() for p in line.split()]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (exited, not yet reaped by its parent) is gone too.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    return False


async def _until_gone(pids: list[int]) -> None:
    with anyio.fail_after(scaled(10)):
        while not all(_gone(p) for p in pids):
            await anyio.sleep(0.05)


async def test_a_server_that_exits_at_start_is_named_with_its_exit_code_and_stderr(
        world: World) -> None:
    servers = {**world.need("time"), "crashy": _crashy(world, "exit")}
    with anyio.fail_after(scaled(30)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            found = await client.call_tool("search_tools", {"query": "current time"})
            assert not found.is_error
            listed = await client.list_tools()
            search = next(t for t in listed.tools if t.name == "search_tools")
            reason = "Server 'crashy' exited with code 3."  # its stderr is the operator's
            assert reason in (search.description or "")
            assert gateway.failures["crashy"] == (
                "Server 'crashy' exited with code 3: fatal: missing API key.")
            called = await client.call_tool("call_tool", {"name": "crashy__echo"})
            assert called.is_error
            assert text(called) == f"'crashy__echo' cannot run now: {reason}"
            await _time_still_served(client)
    assert "fatal: missing API key" in world.log.read_text()  # the operator still sees it


async def test_a_listed_server_that_then_fails_says_why_when_its_tool_is_called(
        world: World) -> None:
    servers = {"crashy": _crashy(world, "once", str(world.root / "started"))}
    with anyio.fail_after(scaled(30)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            first = await client.call_tool("call_tool", {"name": "crashy__echo",
                                                         "arguments": {"text": "hi"}})
            assert first.is_error
            assert text(first) == (
                "Server 'crashy' stopped while running 'echo': it exited with code 3. It will be "
                "started again on the next call.")
            again = await client.call_tool("call_tool", {"name": "crashy__echo",
                                                         "arguments": {"text": "hi"}})
            assert again.is_error
            assert text(again) == "Server 'crashy' exited with code 3."


async def test_the_first_listing_does_not_wait_for_a_hung_server_and_its_group_ends(
        world: World) -> None:
    pidfile = world.root / "hung.pids"
    servers = {**world.need("time"),
               "hung": _crashy(world, "hang", str(pidfile), timeout=scaled(20))}
    with anyio.fail_after(scaled(40)):
        changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

        async with running(world, servers) as (gateway, server), Client(
                server, mode="legacy", message_handler=on_message) as client:
            gateway.list_grace = 0.2
            started = anyio.current_time()
            listed = await client.list_tools()
            assert anyio.current_time() - started < 5  # not the hung server's 20 s
            search = next(t for t in listed.tools if t.name == "search_tools")
            assert "'hung'" in (search.description or "").split("Starting: ")[1]
            # the time server arrives on its own and is announced
            with anyio.fail_after(scaled(20)):
                await changed.wait()
                while "time__get_current_time" not in (await gateway.toolbox()).catalog:
                    await anyio.sleep(0.05)
            relisted = await client.list_tools()
            search = next(t for t in relisted.tools if t.name == "search_tools")
            assert (search.description or "").endswith(
                "<tool_capabilities>data, time</tool_capabilities> Starting: 'hung' (their tools "
                "are announced when ready).")
            await _time_still_served(client)
            with anyio.fail_after(scaled(10)):
                while not pidfile.exists():
                    await anyio.sleep(0.05)
        # The gateway stopped while the start was still waiting for a handshake: the hung
        # server and the child it started are both gone.
        await _until_gone(_pids(pidfile))


async def test_a_start_abandoned_at_its_timeout_ends_the_whole_process_group(
        world: World) -> None:
    pidfile = world.root / "hung.pids"
    servers = {"hung": _crashy(world, "hang", str(pidfile), timeout=1)}
    with anyio.fail_after(scaled(40)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            listed = await client.call_tool("search_tools", {"query": "echo"})
            assert not listed.is_error
            box = await gateway.toolbox()
            assert box.unavailable == {"hung": "Server 'hung' could not be started: it did not "
                                               "complete the MCP handshake within 1 s."}
            await _until_gone(_pids(pidfile))  # abandoned: gone while the gateway runs on


async def test_a_handshake_timeout_quotes_what_the_server_wrote(world: World) -> None:
    servers = {"mumble": _crashy(world, "mumble", timeout=1)}
    with anyio.fail_after(scaled(30)):
        async with running(world, servers) as (gateway, _server):
            box = await gateway.toolbox(wait=scaled(20))
            assert box.unavailable == {"mumble": (
                "Server 'mumble' could not be started: it did not complete the MCP handshake "
                "within 1 s.")}
            assert gateway.failures == {"mumble": (  # the operator is told what it wrote
                "Server 'mumble' could not be started: it did not complete the MCP handshake "
                "within 1 s; its stderr: crashy 1.0 / waiting for the license server.")}


async def test_a_child_the_server_leaves_behind_ends_with_the_gateway(world: World) -> None:
    pidfile = world.root / "leave.pids"
    servers = {"leave": _crashy(world, "leave", str(pidfile))}
    with anyio.fail_after(scaled(40)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            echoed = await client.call_tool("call_tool", {"name": "leave__echo",
                                                          "arguments": {"text": "x"}})
            assert not echoed.is_error, text(echoed)
            pids = _pids(pidfile)
            assert not any(_gone(p) for p in pids)
        await _until_gone(pids)


async def test_sigterm_to_the_gateway_process_ends_every_upstream_group(
        world: World) -> None:
    pidfile = world.root / "leave.pids"
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"leave": _crashy(world, "leave",
                                                                   str(pidfile))}}))
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "byref.cli", "gateway", "--config", str(config)])
    gateway_pid: list[int] = []
    with anyio.fail_after(scaled(60)):
        async with Client(params) as client:
            echoed = await client.call_tool("call_tool", {"name": "leave__echo",
                                                          "arguments": {"text": "x"}})
            assert not echoed.is_error, text(echoed)
            upstream, child = _pids(pidfile)
            gateway_pid.append(_parent_of(upstream))
            os.kill(gateway_pid[0], signal.SIGTERM)
            await _until_gone([gateway_pid[0], upstream, child])


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[1])


def _unwritable_store(root: Path) -> str:
    blocker = root / "not-a-dir"
    blocker.write_text("a file where the store's folder should be")
    return f"file://{blocker}/store"


async def test_the_artifact_store_is_checked_at_start(world: World) -> None:
    url = _unwritable_store(world.root)
    config = parse_config({"mcpServers": world.need("time"), "byref": {"store": url}},
                          source="test")
    with pytest.raises(StoreUnavailableError) as caught:
        async with Gateway(config):
            pytest.fail("a gateway whose store cannot be written must not start")
    text = str(caught.value)
    assert text.startswith(f"The artifact store {url!r} cannot be used: the gateway could not "
                           "write to it ([Errno 20] Not a directory: ")
    assert text.endswith(". Check byref.store or --store.") and "\n" not in text

