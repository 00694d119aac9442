"""Upstream tenancy: who shares an upstream process, the pool behind it, and where what a server
sends its client goes.

Over HTTP with several tokens, each principal's calls run on a process of its own (real pids:
started on first use, stopped when idle — the pool's clock driven by the test, no sleeps —,
capped with a one-line refusal, restarted alone after a crash, all gone after stop). A hostile
server (`fixtures/hostile.py`) speaks out of turn after its call returned, while another tenant's
call is in flight: nothing reaches the other tenant, in both protocol generations; with
`"share": "all"` nothing is broadcast or sent to "the last session" either.
"""

from __future__ import annotations

import json
import re
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from _gateway_rig import World, announced_url, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway import Gateway
from byref.gateway.config.file import parse_config
from byref.gateway.upstream.instance.spawn import group_alive

pytestmark = pytest.mark.anyio
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef0000"
MALLORY = "mallory-token-0123456789abcdef"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"},
          MALLORY: {"tenant": "evil", "principal": "mallory"}}
GENERATIONS = ["legacy", "auto"]  # the handshake era, and 2026-07-28 (what auto negotiates)


def serving(world: World, servers: dict[str, Any], **options: Any
            ) -> AbstractAsyncContextManager[tuple[Gateway, str]]:
    return served(world, servers, tokens=TOKENS, **options)


def client(url: str, token: str, **options: Any) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), **options)


async def call(c: Client, tool: str, **arguments: Any) -> Any:
    return await c.call_tool("call_tool", {"name": tool, "arguments": arguments})


def pid_of(result: Any) -> int:
    found = re.search(r"pid (\d+)", text(result))
    assert found, text(result)
    return int(found.group(1))


async def until(check: Any) -> None:
    """Wait (bounded by the test's deadline) until `check()` holds."""
    while not check():
        await anyio.sleep(0.01)


def test_share_defaults_to_one_process_per_principal_on_a_shared_gateway() -> None:
    servers = {"s": {"command": "x"}, "r": {"url": "https://host/mcp"},
               "k": {"command": "x", "share": "all"}}
    many = parse_config({"mcpServers": servers, "byref": {"tokens": TOKENS}})
    assert [many.share_of(s) for s in many.servers] == ["principal", "principal", "all"]
    one = parse_config({"mcpServers": servers, "byref": {"tokens": {ALICE: TOKENS[ALICE]}}})
    assert [one.share_of(s) for s in one.servers] == ["all", "all", "all"]
    stdio = parse_config({"mcpServers": servers})
    assert [stdio.share_of(s) for s in stdio.servers] == ["all", "all", "all"]


async def test_three_principals_two_servers_run_six_processes(world: World) -> None:
    servers = {"a": world.fixture("misbehaving.py", 20), "b": world.fixture("misbehaving.py", 20)}
    with anyio.fail_after(scaled(120)):
        async with serving(world, servers) as (gateway, url):
            pool = gateway.upstreams.pool
            pids: dict[tuple[str, str], int] = {}
            for token in TOKENS:
                async with client(url, token) as c:
                    for server in ("a", "b"):
                        pids[token, server] = pid_of(await call(c, f"{server}__echo", text="x"))
            assert len(set(pids.values())) == 6
            assert sorted(pool.pids().values()) == sorted(pids.values())
            assert all(group_alive(pid) for pid in pids.values())
            assert (pool.live, gateway.upstreams["a"].starts) == (6, 3)

            # A crash takes down one principal's process; the next call starts it alone.
            async with client(url, ALICE) as alice:
                crashed = await call(alice, "a__crash")
                assert crashed.is_error and "exited with code 3" in text(crashed), text(crashed)
                again = pid_of(await call(alice, "a__echo", text="x"))
            assert again != pids[ALICE, "a"]
            assert all(group_alive(pid) for key, pid in pids.items() if key != (ALICE, "a"))
            assert sorted(pool.pids().values()) == sorted(
                [again, *(pid for key, pid in pids.items() if key != (ALICE, "a"))])

            # Idle: nothing is stopped before its time; then every idle process is.
            offset = [0.0]
            pool.clock = lambda: time.monotonic() + offset[0]
            assert await pool.sweep() == 0
            offset[0] = pool.idle + 1
            assert await pool.sweep() == 6
            assert pool.live == 0 and pool.pids() == {}
            assert not any(group_alive(pid) for pid in [again, *pids.values()])
            async with client(url, BOB) as bob:  # a later call starts its owner's again
                later = pid_of(await call(bob, "b__echo", text="x"))
            assert later not in pids.values() and group_alive(later)
        assert not group_alive(later)  # no orphans once the gateway stopped
    assert not any(group_alive(pid) for pid in pids.values())


async def test_a_start_past_a_cap_is_refused_in_one_line(world: World, tmp_path: Path) -> None:
    servers = {"h": world.fixture("hostile.py", 20)}
    with anyio.fail_after(scaled(120)):
        async with serving(world, servers, pool={"maxProcesses": 2, "maxPerTenant": 1}) as (
                gateway, url), client(url, ALICE) as alice, client(url, BOB) as bob, client(
                url, MALLORY) as mallory:
            pool = gateway.upstreams.pool
            first = pid_of(await call(alice, "h__echo"))
            held: list[Any] = []

            async def block() -> None:
                held.append(await call(alice, "h__block", dir=str(tmp_path)))

            async with anyio.create_task_group() as group:
                group.start_soon(block)
                await until(lambda: gateway.upstreams["h"].in_flight == 1)
                refused = await call(bob, "h__echo")
                assert refused.is_error
                assert text(refused).endswith(
                    "Server 'h' was not started for this call: the pool already runs 1 upstream "
                    "process for tenant 'acme' and none is idle (byref.pool.maxPerTenant = 1); "
                    "try again when a call has finished."), text(refused)
                other = pid_of(await call(mallory, "h__echo"))  # another tenant: room
                (tmp_path / "release").touch()
            assert text(held[0]) == "released"
            assert pool.refused == {"maxPerTenant": 1}
            # Alice's process is idle now: Bob's start stops it to make room.
            bobs = pid_of(await call(bob, "h__echo"))
            assert not group_alive(first) and group_alive(other) and group_alive(bobs)
            async with httpx2.AsyncClient(timeout=scaled(10)) as http:
                ready = (await http.get(url.removesuffix("/mcp") + "/readyz")).json()
                scraped = (await http.get(url.removesuffix("/mcp") + "/metrics")).text
            assert ready["checks"]["pool"]["detail"] == (
                "2 pooled upstream processes live, 2 idle, 1 starts refused")
            if gateway.metrics is not None:
                assert 'byref_gateway_upstream_refused_total{limit="maxPerTenant"} 1.0' in scraped
                assert 'byref_gateway_upstream_processes{state="live"} 2.0' in scraped


class Seen:
    """Everything a client was sent by an upstream: questions and log lines."""

    def __init__(self) -> None:
        self.got: list[str] = []

    def options(self, mode: str) -> dict[str, Any]:
        async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
            self.got.append(f"sampling: {params.messages[0].content}")
            return types.CreateMessageResult(role="assistant", model="m", content=(
                types.TextContent(type="text", text="answer")))

        async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
            self.got.append(f"elicitation: {params.message}")
            return types.ElicitResult(action="decline")

        async def roots(_: Any) -> types.ListRootsResult:
            self.got.append("roots")
            return types.ListRootsResult(roots=[types.Root(uri="file:///home/secret")])  # type: ignore[arg-type]

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            self.got.append(f"log: {params.data}")

        return {"mode": mode, "sampling_callback": sampling, "elicitation_callback": elicitation,
                "list_roots_callback": roots, "logging_callback": log}


async def _out_of_turn(world: World, tmp_path: Path, mode: str, share: str | None,
                       *, blockers: tuple[str, ...]) -> tuple[Seen, Seen, dict[str, Any]]:
    """Alice arms the hostile server; the server speaks while the `blockers`' calls are in
    flight. What each client saw, and what the server was answered."""
    entry = world.fixture("hostile.py", 20, **({"share": share} if share else {}))
    alice_seen, mallory_seen = Seen(), Seen()
    d = str(tmp_path)
    with anyio.fail_after(scaled(120)):
        async with serving(world, {"h": entry}) as (gateway, url), client(
                url, ALICE, **alice_seen.options(mode)) as alice, client(
                url, MALLORY, **mallory_seen.options(mode)) as mallory:
            armed = await call(alice, "h__arm", dir=d)
            assert text(armed).startswith("armed pid"), text(armed)
            done: list[str] = []

            async def block(c: Client) -> None:
                done.append(text(await call(c, "h__block", dir=d)))

            await call(mallory, "h__echo")  # Mallory used it last (one process when shared)
            async with anyio.create_task_group() as group:
                for who in blockers:
                    group.start_soon(block, {"alice": alice, "mallory": mallory}[who])
                await until(lambda: gateway.upstreams["h"].in_flight == len(blockers))
                (tmp_path / "go").touch()
                await until((tmp_path / "sent.json").exists)
                (tmp_path / "release").touch()
            assert done == ["released"] * len(blockers)
    return alice_seen, mallory_seen, json.loads((tmp_path / "sent.json").read_text())


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_a_servers_later_traffic_never_reaches_another_tenant(
        world: World, tmp_path: Path, mode: str) -> None:
    alice, mallory, sent = await _out_of_turn(world, tmp_path, mode, None,
                                           blockers=("mallory",))
    assert mallory.got == []
    if mode == "legacy":
        # Alice's own process: the one session of its owner hears it, on its standing stream.
        assert sorted(alice.got) == sorted([
            *(f"log: hostile secret log {i}" for i in range(3)), "roots",
            "sampling: type='text' text='hostile secret prompt' annotations=None meta=None",
            "elicitation: hostile secret form"])
        assert sent["h-roots"] == {"roots": [{"uri": "file:///home/secret"}]}
        return
    # A 2026-07-28 client has no channel outside its calls: refused, roots as configured.
    assert alice.got == []
    outside = "arrived outside any client call, so no client can be asked; it is refused."
    assert sent["h-sampling"]["message"] == f"byref gateway: sampling/createMessage from server " \
        f"'h' {outside}"
    assert sent["h-elicit"]["message"] == f"byref gateway: elicitation/create from server 'h' " \
        f"{outside}"
    assert sent["h-roots"] == {"roots": []}  # the server's configured roots: none


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_shared_by_all_keeps_per_call_attribution(
        world: World, tmp_path: Path, mode: str) -> None:
    # One process for both tenants, both calls in flight: nothing can be attributed, so the
    # questions are refused and the log lines dropped — never broadcast, never "the last one".
    alice, mallory, sent = await _out_of_turn(world, tmp_path, mode, "all",
                                           blockers=("mallory", "alice"))
    assert mallory.got == [] and alice.got == []
    for rid, method in (("h-sampling", "sampling/createMessage"),
                        ("h-elicit", "elicitation/create"), ("h-roots", "roots/list")):
        assert sent[rid]["message"] == (f"byref gateway: {method} from server 'h' cannot be "
                                        "attributed: calls of 2 client sessions are in flight "
                                        "on it.")


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_shared_by_all_sends_nothing_to_the_last_session(
        world: World, tmp_path: Path, mode: str) -> None:
    # Both clients used the one process; no call is in flight when the server speaks.
    alice, mallory, sent = await _out_of_turn(world, tmp_path, mode, "all", blockers=())
    assert mallory.got == [] and alice.got == []
    assert sent["h-sampling"]["message"].endswith("arrived outside any client call, so no "
                                                  "client can be asked; it is refused.")
    assert sent["h-roots"] == {"roots": []}


async def test_a_parked_call_does_not_block_another_owners_questions(
        world: World, tmp_path: Path) -> None:
    alice_asked, release = anyio.Event(), anyio.Event()

    def answering(who: str, wait: bool) -> Any:
        async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
            if wait:
                alice_asked.set()
                await release.wait()
            return types.CreateMessageResult(role="assistant", model="m", content=(
                types.TextContent(type="text", text=f"from {who}")))
        return sampling

    with anyio.fail_after(scaled(120)):
        async with serving(world, {"h": world.fixture("hostile.py", 20)}) as (_g, url), client(
                url, ALICE, sampling_callback=answering("alice", True)) as alice, client(
                url, MALLORY, sampling_callback=answering("mallory", False)) as mallory:
            got: list[str] = []

            async def alice_asks() -> None:
                got.append(text(await call(alice, "h__ask", text="q")))

            async with anyio.create_task_group() as group:
                group.start_soon(alice_asks)
                await alice_asked.wait()  # Alice's 2026-07-28 call is parked on her answer
                assert text(await call(mallory, "h__ask", text="q")) == "sampled: from mallory"
                release.set()
            assert got == ["sampled: from alice"]


async def test_a_remote_server_gets_one_upstream_session_per_principal(world: World) -> None:
    import subprocess
    import sys

    with anyio.fail_after(scaled(120)):
        async with await anyio.open_process(
                [sys.executable, "-m", "byref.bench.gateway.upstream", "--http"],
                stderr=subprocess.PIPE) as upstream:
            try:
                assert upstream.stderr is not None
                remote = await announced_url(upstream.stderr)
                async with serving(world, {"r": {"url": remote, "timeout": scaled(20)}}) as (
                        gateway, url):
                    for token in (ALICE, MALLORY, ALICE):
                        async with client(url, token) as c:
                            assert text(await call(c, "r__echo", text="hi")) == "hi"
                    sessions = gateway.upstreams["r"].instances
                    assert sorted(sessions) == [("acme", "alice"), ("evil", "mallory")]
                    assert all(s.connected is not None for s in sessions.values())
                    assert gateway.upstreams["r"].starts == 2
            finally:
                upstream.terminate()
