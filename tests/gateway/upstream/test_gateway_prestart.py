"""Prestart: a principal's own upstream process starts when it connects (or lists its tools),
so its first call finds it running; within the pool's caps, never for a principal that has not
connected, never for a server its grant does not see.

Real processes (`fixtures/misbehaving.py`, whose echo names its pid) behind an HTTP gateway with
several tokens; what is asserted is the pool's state (which instances run, their pids and start
counts, the pool's prestart counters), never a duration.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import anyio
import pytest
from _gateway_rig import World, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway.config.file import parse_config
from byref.gateway.config.values import ConfigError

pytestmark = pytest.mark.anyio
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef0000"
MALLORY = "mallory-token-0123456789abcdef"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"},
          MALLORY: {"tenant": "evil", "principal": "mallory"}}
ALICE_KEY, BOB_KEY = ("acme", "alice"), ("acme", "bob")


def client(url: str, token: str, mode: str = "auto") -> Client:
    """A client of `token`: handshake-era (`legacy`: it connects with `initialize` and
    `initialized`) or 2026-07-28 (`auto`: with `server/discover`)."""
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), mode=mode)


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


def running(gateway: Any, server: str, key: tuple[str, ...]) -> bool:
    up = gateway.upstreams[server].instances.get(key)
    return up is not None and up.connected is not None


@pytest.mark.parametrize("value", ["connect", "list", False])
def test_prestart_is_connect_list_or_false(value: Any) -> None:
    config = parse_config({"mcpServers": {"s": {"command": "x", "prestart": value}}})
    assert config.servers[0].prestart == (value or None)


@pytest.mark.parametrize("value", [True, "call", None, 1])
def test_any_other_prestart_is_refused_saying_what_fits(value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"s": {"command": "x", "prestart": value}}}, source="c")
    assert str(info.value) == (
        "Config 'c' server 's': 'prestart' must be 'connect' (start a principal's process of it "
        "when the principal connects), 'list' (on its first tools/list) or false (on its first "
        f"call, the default), got {value!r}.")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_principal_that_connects_finds_its_process_started(world: World,
                                                                   mode: str) -> None:
    servers = {"a": world.fixture("misbehaving.py", 20, prestart="connect"),
               "b": world.fixture("misbehaving.py", 20)}
    with anyio.fail_after(scaled(120)):
        async with served(world, servers, tokens=TOKENS) as (gateway, url):
            pool = gateway.upstreams.pool

            def of(key: tuple[str, ...]) -> set[str]:
                return {server for server, k in pool.pids() if k == key}

            async with client(url, MALLORY) as mallory:  # the catalog is listed on hers
                await mallory.list_tools()
                await until(lambda: running(gateway, "a", ("evil", "mallory")))
            assert of(ALICE_KEY) == of(BOB_KEY) == set()
            async with client(url, ALICE, mode):  # connected, nothing asked yet
                await until(lambda: running(gateway, "a", ALICE_KEY))
            # Alice connected: her "a" started; her "b" waits for a call; Bob's nothing.
            assert (of(ALICE_KEY), of(BOB_KEY)) == ({"a"}, set())
            before = pool.pids()[("a", ALICE_KEY)]
            async with client(url, ALICE) as alice:
                assert pid_of(await call(alice, "a__echo", text="x")) == before
            assert gateway.upstreams["a"].instances[ALICE_KEY].starts == 1

            async with client(url, BOB, mode) as bob:
                await until(lambda: running(gateway, "a", BOB_KEY))
                started = pool.pids()[("a", BOB_KEY)]
                assert pid_of(await call(bob, "a__echo", text="x")) == started
                assert of(BOB_KEY) == {"a"}
                assert pid_of(await call(bob, "b__echo", text="x")) != started
            assert gateway.upstreams["a"].instances[BOB_KEY].starts == 1
            assert (pool.prestarts, pool.prestarts_skipped) == (3, 0)


async def test_list_prestarts_on_the_first_tools_list_only(world: World) -> None:
    servers = {"a": world.fixture("misbehaving.py", 20, prestart="list")}
    with anyio.fail_after(scaled(120)):
        async with served(world, servers, tokens=TOKENS) as (gateway, url):
            pool = gateway.upstreams.pool
            async with client(url, ALICE) as alice:
                await alice.list_tools()  # the catalog is listed on her instance
                async with client(url, BOB) as bob:
                    assert ("a", BOB_KEY) not in pool.pids()  # connected, not listed yet
                    await bob.list_tools()
                    await until(lambda: running(gateway, "a", BOB_KEY))
                    started = pool.pids()[("a", BOB_KEY)]
                    assert pid_of(await call(bob, "a__echo", text="x")) == started
            assert gateway.upstreams["a"].instances[BOB_KEY].starts == 1
            assert pool.prestarts >= 1


async def test_a_prestart_never_stops_another_process_nor_passes_a_cap(world: World) -> None:
    servers = {"a": world.fixture("misbehaving.py", 20, prestart="connect")}
    with anyio.fail_after(scaled(120)):
        async with served(world, servers, tokens=TOKENS,
                          pool={"maxProcesses": 2, "maxPerTenant": 1}) as (gateway, url):
            pool = gateway.upstreams.pool
            async with client(url, ALICE) as alice:
                await until(lambda: running(gateway, "a", ALICE_KEY))
                alices = pid_of(await call(alice, "a__echo", text="x"))
                # Bob is of Alice's tenant, whose one slot she holds: his connect starts nothing
                # and stops nothing; no refusal is counted.
                async with client(url, BOB) as bob:
                    await bob.list_tools()
                    await until(lambda: pool.prestarts_skipped >= 1)
                    assert set(pool.pids()) == {("a", ALICE_KEY)}
                    assert pool.pids()[("a", ALICE_KEY)] == alices and not pool.refused
                    # Mallory's tenant has room: hers starts (two processes, the gateway's cap).
                    async with client(url, MALLORY):
                        await until(lambda: running(gateway, "a", ("evil", "mallory")))
                    assert pool.live == 2
            assert pool.prestarts == 2


async def test_no_prestart_of_a_server_the_grant_does_not_see(world: World) -> None:
    hidden = "carol-token-0123456789abcdef00"
    tokens = {**TOKENS, "sha256:" + hashlib.sha256(hidden.encode()).hexdigest(): {
        "tenant": "acme", "principal": "carol", "servers": ["b"]}}
    servers = {"a": world.fixture("misbehaving.py", 20, prestart="connect"),
               "b": world.fixture("misbehaving.py", 20, prestart="connect")}
    with anyio.fail_after(scaled(120)):
        async with served(world, servers, tokens=tokens) as (gateway, url):
            pool = gateway.upstreams.pool
            async with client(url, MALLORY) as mallory:  # the catalog is listed on hers
                await mallory.list_tools()
            async with client(url, hidden):
                await until(lambda: running(gateway, "b", ("acme", "carol")))
            assert {s for s, key in pool.pids() if key == ("acme", "carol")} == {"b"}
