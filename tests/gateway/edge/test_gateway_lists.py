"""Lists by the 2026-07-28 revision: a client of that revision reads the same tools/list,
resources/list and prompts/list before and after a search, an activation and calls (activation
answers with the declaration, the call goes through call_tool), while a handshake-era client's
tool list still grows; lists carry ttlMs/cacheScope (private where grants make them differ), a
cached list stays correct (the SDK client's cache serves it within its ttl and drops it when the
listen stream says the upstream changed), and server/discover says what the gateway relays.

Real clients: the official `mcp` 2.x client in both generations (in-process and over HTTP), the
official `mcp` 1.x client (handshake era, in `.venv-sqlite`) and the FastMCP 4 client over stdio
in both generations.
Run a second time with BYREF_SDK_PATHS_ONLY=1 (every request through the SDK's own paths).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running, served, text
from mcp import Client
from mcp.client.caching import CacheConfig
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway.edge.caching import LIST_TTL_MS
from byref.gateway.edge.discover import UPSTREAMS_META_KEY

pytestmark = pytest.mark.anyio

TOOL = "time__get_current_time"
ARGS = {"timezone": "UTC"}
ROOT = Path(__file__).resolve().parents[3]
MCP1 = ROOT / ".venv-sqlite" / "bin" / "python"
ALICE, BOB = "a-long-random-token-for-alice-lists-01", "a-long-random-token-for-bob-lists-0001"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob", "servers": ["time"]}}


def _http(url: str, token: str, **options: Any) -> Client:
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), **options)


def _big_file(world: World) -> Path:
    path = world.files / "big.txt"
    path.write_text("".join(f"line {i}: {'x' * 60}\n" for i in range(4_000)))
    return path


async def _lists(client: Client) -> dict[str, Any]:
    """Every list as the server answers it now (the client's cache bypassed)."""
    tools = await client.list_tools(cache_mode="bypass")
    resources = await client.list_resources(cache_mode="bypass")
    prompts = await client.list_prompts(cache_mode="bypass")
    return {"tools": [t.model_dump() for t in tools.tools],
            "resources": [r.model_dump() for r in resources.resources],
            "prompts": [p.model_dump() for p in prompts.prompts],
            "hints": [(r.ttl_ms, r.cache_scope) for r in (tools, resources, prompts)]}


async def _round(client: Client, world: World) -> tuple[list[dict[str, Any]], str]:
    """Lists, then search → lists → activate → lists → call → lists → a stored result → lists;
    returns the lists and the call's text. A 2026-07-28 client runs the tool through call_tool
    with the declaration activate_tool answered; a handshake-era one by name, once declared."""
    stable = client.protocol_version == "2026-07-28"
    seen = [await _lists(client)]
    found = json.loads(text(await client.call_tool("search_tools", {"query": "current time"})))
    assert found["results"][0]["name"] == TOOL
    seen.append(await _lists(client))
    activated = json.loads(text(await client.call_tool("activate_tool", {"names": [TOOL]})))
    seen.append(await _lists(client))
    if stable:
        declared = activated["declarations"][0]
        assert declared["name"] == TOOL and "timezone" in declared["input_schema"]["properties"]
        assert "call_tool" in activated["next"]
        called = await client.call_tool("call_tool", {"name": TOOL, "arguments": ARGS})
    else:
        assert activated["activated"] == [TOOL]
        called = await client.call_tool(TOOL, ARGS)
    assert not called.is_error, text(called)
    seen.append(await _lists(client))
    stored = await client.call_tool("call_tool", {"name": "filesystem__read_text_file",
                                                  "arguments": {"path": str(_big_file(world))}})
    assert not stored.is_error
    assert json.loads(stored.content[0].text)["placed"] is True  # stored: an artifact now
    seen.append(await _lists(client))
    return seen, text(called)


def _names(listed: dict[str, Any]) -> list[str]:
    return [t["name"] for t in listed["tools"]]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_in_process(world: World, mode: str) -> None:
    servers = world.need("time", "filesystem")
    with anyio.fail_after(scaled(90)):
        async with running(world, servers) as (gateway, server), Client(
                server, mode=mode) as client:
            await gateway.toolbox()  # settled: no server starting (that list would change)
            version = client.protocol_version
            seen, called = await _round(client, world)
    assert json.loads(called)["timezone"] == "UTC"
    assert (version == "2026-07-28") == (mode == "auto")
    if mode == "auto":
        assert all(s == seen[0] for s in seen[1:]), [_names(s) for s in seen]
        assert TOOL not in _names(seen[0])
        # Over stdio nothing restricts anyone: public, fresh for a minute; resources are the
        # upstreams' data, never shared.
        assert seen[0]["hints"] == [(LIST_TTL_MS, "public"), (LIST_TTL_MS, "private"),
                                    (LIST_TTL_MS, "public")]
    else:
        assert TOOL not in _names(seen[1])
        assert TOOL in _names(seen[2]) and TOOL in _names(seen[3])
        # The stored result is one of the caller's artifacts, listed to a handshake-era client.
        assert len(seen[4]["resources"]) == len(seen[3]["resources"]) + 1


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_official_client_over_http_with_grants(world: World, mode: str) -> None:
    servers = world.need("time", "filesystem")
    with anyio.fail_after(scaled(90)):
        async with served(world, servers, tokens=TOKENS) as (gateway, url):
            await gateway.toolbox()
            async with _http(url, ALICE, mode=mode) as alice:
                seen, _called = await _round(alice, world)
            async with _http(url, BOB, mode=mode) as bob:
                bobs = await _lists(bob)
                found = await bob.session.send_discover("2026-07-28") if mode == "auto" else None
    assert "filesystem__read_text_file" not in json.dumps(bobs["tools"])
    if found is not None:  # what Bob's grant sees: the time server alone, never shared
        discovered = types.DiscoverResult.model_validate(found)
        assert set((discovered.meta or {})[UPSTREAMS_META_KEY]) == {"time"}
        assert discovered.cache_scope == "private"
    if mode == "auto":
        assert all(s == seen[0] for s in seen[1:]), [_names(s) for s in seen]
        # Bob's grant restricts what he sees, so no one's list may be shared.
        assert {scope for s in (seen[0], bobs) for _ttl, scope in s["hints"]} == {"private"}
    else:
        assert TOOL in _names(seen[3]) and TOOL not in _names(seen[1])


async def test_a_cached_list_stays_correct(world: World,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    servers = {"garden": world.fixture("changing.py"), **world.need("time")}
    now = [1_000_000.0]  # the client cache's clock (CacheConfig takes one), moved by hand
    with anyio.fail_after(scaled(90)):
        async with running(world, servers) as (gateway, server), Client(
                server, cache=CacheConfig(clock=lambda: now[0])) as client:
            await gateway.toolbox()
            asked: list[int] = []
            real = gateway.declarations

            async def counted(state: Any, **kw: Any) -> list[dict[str, Any]]:
                asked.append(1)  # a tools/list that reached the gateway
                return await real(state, **kw)

            monkeypatch.setattr(gateway, "declarations", counted)
            first = await client.list_tools()
            assert first.ttl_ms == LIST_TTL_MS and len(asked) == 1
            await client.call_tool("activate_tool", {"names": [TOOL]})
            await client.call_tool("call_tool", {"name": TOOL, "arguments": ARGS})
            # Within its ttl the SDK serves its cached list, and it is the server's list still.
            cached = await client.list_tools()
            assert cached.tools == first.tools and len(asked) == 1
            assert (await client.list_tools(cache_mode="bypass")).tools == first.tools
            now[0] += LIST_TTL_MS / 1000  # the ttl has run out: asked again, and the same
            assert (await client.list_tools()).tools == first.tools and len(asked) == 3
            async with client.listen(tools_list_changed=True) as changes:
                grown = await client.call_tool("call_tool", {"name": "garden__grow"})
                assert text(grown) == "now 2 tools"
                event = await changes.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            # The change dropped the cached list: the next one is the server's again.
            box = await gateway.toolbox()
            while "garden__water_seedling_1" not in box.catalog:
                await anyio.wait_all_tasks_blocked()
                box = await gateway.toolbox()
            before = len(asked)
            fresh = await client.list_tools()  # within the ttl, yet asked: the change evicted it
            assert len(asked) == before + 1
            assert fresh.tools == (await client.list_tools(cache_mode="bypass")).tools


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_fastmcp_client_over_stdio(world: World, mode: str) -> None:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                                  "(pip install -e '.[gateway-test]')")
    from fastmcp.client.transports import StdioTransport

    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": world.need("time")}))
    transport = StdioTransport(sys.executable, ["-m", "byref.cli", "gateway", "--config",
                                                str(config)], env=dict(os.environ),
                               keep_alive=False, log_file=world.log)
    with anyio.fail_after(scaled(90)):
        async with fastmcp.Client(transport, mode=mode) as client:
            stable = client.protocol_version == "2026-07-28"
            assert stable == (mode == "auto")
            # A first list does not wait for the server: call once, so its tools are in.
            await client.call_tool("search_tools", {"query": "time"})
            before = await client.list_tools()
            assert TOOL not in {t.name for t in before}
            found = await client.call_tool("search_tools", {"query": "current time"})
            assert json.loads(found.content[0].text)["results"][0]["name"] == TOOL
            assert await client.list_tools() == before
            activated = json.loads((await client.call_tool(
                "activate_tool", {"names": [TOOL]})).content[0].text)
            if stable:  # the declaration in the answer, the list as it was
                assert [d["name"] for d in activated["declarations"]] == [TOOL]
                assert await client.list_tools() == before
                called = await client.call_tool("call_tool", {"name": TOOL, "arguments": ARGS})
                assert await client.list_tools() == before
            else:  # declared from now on
                assert activated["activated"] == [TOOL]
                grown = await client.list_tools()
                assert [t.name for t in grown] == sorted([*(t.name for t in before), TOOL])
                called = await client.call_tool(TOOL, ARGS)
            assert json.loads(called.content[0].text)["timezone"] == "UTC"


def test_the_mcp_1_client_still_sees_its_list_grow(world: World) -> None:
    if not MCP1.exists():
        pytest.skip(f"the mcp 1.x client's virtualenv is missing ({MCP1}; `make upstreams`)")
    config = world.root / "gateway.json"
    config.write_text(json.dumps({"mcpServers": world.need("time")}))
    done = subprocess.run(
        [str(MCP1), str(FIXTURES / "mcp1_round.py"), sys.executable, str(config), TOOL,
         "current time", json.dumps(ARGS)],
        capture_output=True, text=True, timeout=scaled(120), env=dict(os.environ), check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["protocol_version"] != "2026-07-28"
    assert out["found"] == TOOL
    assert TOOL not in out["before"] and out["after_search"] == out["before"]
    assert out["after_activation"] == sorted([*out["before"], TOOL])
    assert out["after_call"] == out["after_activation"]
    assert not out["called_error"] and json.loads(out["called"])["timezone"] == "UTC"


async def test_discover_says_what_the_gateway_relays(world: World) -> None:
    servers = {"time": world.need("time")["time"],
               "passthrough": world.fixture("passthrough_server.py", timeout=scaled(30))}
    with anyio.fail_after(scaled(90)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            await gateway.toolbox()
            for name in servers:  # both known: each listed (its process is up)
                await gateway.upstreams[name].request("a ping", lambda c: anyio.sleep(0))
            found = await client.session.send_discover("2026-07-28")
    result = types.DiscoverResult.model_validate(found)
    assert result.supported_versions[0] == "2026-07-28"
    assert "2025-11-25" in result.supported_versions
    caps = result.capabilities
    assert caps.tools is not None and caps.tools.list_changed
    assert caps.prompts is not None  # the passthrough fixture offers prompts
    assert caps.resources is not None and caps.completions is not None
    assert result.ttl_ms == LIST_TTL_MS and result.cache_scope == "public"
    upstreams = (result.meta or {})[UPSTREAMS_META_KEY]
    assert upstreams["time"]["serverInfo"]["name"] == "mcp-time"
    assert set(upstreams) == {"time", "passthrough"}
    assert all(u["protocolVersion"] for u in upstreams.values())


async def test_a_cold_gateway_advertises_all_it_relays(world: World) -> None:
    """Issue 39.E: before any server is up, `server/discover` (2026-07-28) and `initialize`
    advertised no prompts and no logging, and a client that reads capabilities once never asked
    for them. A cold gateway advertises all it relays; what each server offers follows in its
    lists (announced as servers come up)."""
    servers = {"time": world.need("time")["time"],
               "passthrough": world.fixture("passthrough_server.py", timeout=scaled(30))}
    with anyio.fail_after(scaled(90)):
        async with running(world, servers) as (gateway, server):
            async with Client(server, mode="legacy") as legacy:
                assert all(u.starts == 0 for u in gateway.upstreams.upstreams.values())  # cold
                shaken = legacy.server_capabilities  # from `initialize`
            async with Client(server) as modern:
                found = await modern.session.send_discover("2026-07-28")
    for caps in (types.DiscoverResult.model_validate(found).capabilities, shaken):
        assert caps.tools is not None and caps.tools.list_changed
        assert caps.prompts is not None and caps.prompts.list_changed
        assert caps.resources is not None and caps.logging is not None
