"""One principal's work cannot starve another's worker threads (`gateway/access/threads`).

Real components: the gateway served over HTTP with two tokens, `fixtures/code_server.py` over
stdio, run_code programs in the real sandbox. anyio's shared limiter is cut to 4 threads for the
test, so 4 programs held in their calls would take every one of them were runs on it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from _code_rig import code_server
from _gateway_rig import World, ref_line_of, running, served, text_blocks
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway.catalog.code import code_runner
from byref.gateway.config.file import ConfigError, GatewayConfig, parse_config
from byref.tools.run_python.sandbox import Sandbox

pytestmark = pytest.mark.anyio
ANNA = "anna-token-0123456789abcdef0000"
BORIS = "boris-token-0123456789abcdef000"
TOKENS = {ANNA: {"tenant": "a", "principal": "anna"}, BORIS: {"tenant": "b", "principal": "boris"}}
HOLD = """
print(tools.code__hold(key={key!r}, seconds=60))
"""


def _client(url: str, token: str) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})))


async def _call(client: Client, name: str, **arguments: Any) -> Any:
    return await client.call_tool("call_tool", {"name": name, "arguments": arguments})


async def test_runs_at_their_cap_leave_another_principals_reads_fast(
        world: World, tmp_path: Path) -> None:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    shared = anyio.to_thread.current_default_thread_limiter()
    before = shared.total_tokens
    shared.total_tokens = 4
    ran: list[str] = []
    try:
        with anyio.fail_after(scaled(120)):
            async with served(world, code_server(tmp_path), tokens=TOKENS, codeMode="readOnly",
                              codeRuns={"maxRuns": 6, "maxPerPrincipal": 4}) as (
                    gateway, url), _client(url, ANNA) as anna, _client(url, BORIS) as boris:
                looked = await _call(anna, "code__lookup", sku="A-1")
                source = ref_line_of(looked)
                assert source is not None, text_blocks(looked)

                async def run(key: str) -> None:
                    done = await boris.call_tool("run_code", {"code": HOLD.format(key=key)})
                    ran.append(text_blocks(done)[0])

                async with anyio.create_task_group() as group:
                    for i in range(4):
                        group.start_soon(run, f"b{i}")
                    code = gateway.upstreams["code"]
                    while code.in_flight < 4:  # every program in its hold
                        await anyio.sleep(0.01)
                    # On Boris's own process: code's calls run as whoever ran the program.
                    assert code.instances[("b", "boris")].relay.in_flight == 4
                    assert sorted(code.instances) == [("a", "anna"), ("b", "boris")]
                    # A fifth of Boris's is refused at once, naming the setting.
                    fifth = await boris.call_tool("run_code", {"code": HOLD.format(key="b4")})
                    assert fifth.is_error
                    assert text_blocks(fifth)[0] == (
                        "Tool 'run_code' did not run: 4 of your programs already run "
                        "(byref.codeRuns.maxPerPrincipal = 4); try again when one has finished.")
                    # Anna's read runs on a worker thread while Boris's four programs hold theirs.
                    started = time.perf_counter()
                    with anyio.fail_after(scaled(10)):
                        read = await _call(anna, "read_json", source=source)
                    took = time.perf_counter() - started
                    assert not read.is_error, text_blocks(read)
                    assert '"stock"' in text_blocks(read)[0]
                    assert ran == [] and gateway.threads.running == {("b", "boris"): 4}
                    for i in range(4):
                        assert not (await _call(boris, "code__release", key=f"b{i}")).is_error
                assert len(ran) == 4 and all("code__hold" in r for r in ran), ran
                assert gateway.threads.running == {}
                assert gateway.threads.refused == {"maxPerPrincipal": 1}
                print(f"anna's read_json with boris's 4 runs held: {took:.3f}s")
    finally:
        shared.total_tokens = before


async def test_an_activate_tool_far_past_the_catalog_is_refused_before_a_thread(
        world: World) -> None:
    names = [f"nope_{i}" for i in range(100_000)]
    shared = anyio.to_thread.current_default_thread_limiter()
    with anyio.fail_after(scaled(60)):
        async with running(world, {"h": world.fixture("hostile.py", 20)}) as (
                gateway, server), Client(server) as client:
            box = await gateway.toolbox()
            size = len(box.catalog)
            borrowed = shared.borrowed_tokens
            started = time.perf_counter()
            refused = await client.call_tool("activate_tool", {"names": names})
            took = time.perf_counter() - started
            assert refused.is_error
            assert text_blocks(refused)[0] == (
                f"Tool 'activate_tool' did not run: 100000 names are more than the catalog holds "
                f"({size} tools); name the tools you want from a search_tools result.")
            assert shared.borrowed_tokens == borrowed
            # Within the bound, unknown names are refused with suggestions for the first few.
            some = await client.call_tool("activate_tool", {"names": names[:60]})
            said = text_blocks(some)[0]
            assert some.is_error and "55 more names are not in the catalog either." in said
            print(f"activate_tool with 100,000 names refused in {took:.3f}s")


def test_code_runs_settings_are_checked() -> None:
    def config(runs: object) -> GatewayConfig:
        return parse_config({"mcpServers": {"x": {"command": "x"}}, "byref": {"codeRuns": runs}})

    assert (config({"maxRuns": 3}).runs_max, config({}).runs_max_per_principal) == (3, 4)
    with pytest.raises(ConfigError, match=r"byref.codeRuns.maxPerPrincipal must be a whole "
                                          r"number of programs, 1 or more, got 0\."):
        config({"maxPerPrincipal": 0})
    with pytest.raises(ConfigError, match=r"byref.codeRuns must be an object with "
                                          r"'maxPerPrincipal', 'maxRuns', 'warm', got "
                                          r"\{'max': 1\}\."):
        config({"max": 1})
    assert (config({}).runs_warm, config({"warm": 0}).runs_warm) == (1, 0)
    with pytest.raises(ConfigError, match=r"byref.codeRuns.warm must be a whole number of "
                                          r"sandboxes, 0 or more, got -1\."):
        config({"warm": -1})


def test_the_gateways_warm_sandboxes_count_against_max_runs() -> None:
    # One runner for the gateway: its pool keeps `warm` a kind of run, within maxRuns alive.
    config = parse_config({"mcpServers": {"x": {"command": "x"}}, "byref": {
        "codeMode": "all", "codeRuns": {"maxRuns": 3, "warm": 2}}})
    runner = code_runner(config)
    assert runner is not None and runner.pool is not None
    assert (runner.pool.size, runner.pool.cap) == (2, 3)
    runner.close()
    off = parse_config({"mcpServers": {"x": {"command": "x"}}, "byref": {
        "codeMode": "all", "codeRuns": {"warm": 0}}})
    runner = code_runner(off)
    assert runner is not None and runner.pool is None
    assert code_runner(parse_config({"mcpServers": {"x": {"command": "x"}}})) is None
