"""The client SDKs apps are built on, in front of `byref gateway`, the time server and the blocks
fixture: the FastMCP client (PyPI) in both protocol generations and the official TypeScript SDK's
client (npm), each over stdio and HTTP. Each lists, searches, activates and calls a tool, sees a
result of several blocks keep its shape, hears a tool's log lines and forwards a 196-byte JSON by
its ref line byte-exact. The HTTP clients share one gateway (each its own principal); each skips,
saying why, where it is not installed (`make upstreams` installs them all)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import World
from _real_clients import (
    FIXTURES,
    LOGGED,
    SCAFFOLD,
    TOKENS,
    TOOL,
    TS_SDK,
    Served,
    check_doc,
    check_mixed,
    check_saved,
    node_client,
    served,
    stdio_gateway,
)

from _waits import scaled

pytestmark = pytest.mark.anyio
__all__ = ["served"]  # the module's shared HTTP gateway (a fixture)
GENERATIONS = {"2026-07-28": "auto", "2025-11-25": "legacy"}
"""The protocol generation a FastMCP client is to speak, and the mode that gets it."""


def _fastmcp() -> Any:
    return pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                               "(pip install -e '.[dev]')")


def _wire(result: Any) -> dict[str, Any]:
    """A FastMCP result as the JSON the gateway sent (what the shared checks read)."""
    return {"content": [b.model_dump(by_alias=True, mode="json", exclude_none=True)
                        for b in result.content], "isError": result.is_error}


async def _fastmcp_round(client: Any, out: Path, logs: list[tuple[str | None, Any]]) -> None:
    """List, search, activate, list again, call (a handshake-era client by the tool's own name,
    a 2026-07-28 one through call_tool: its list never grows) and through call_tool; the shapes,
    the forwarded document and the log lines."""
    names = {t.name for t in await client.list_tools()}
    assert names >= SCAFFOLD
    assert TOOL not in names
    found = await client.call_tool("search_tools", {"query": "current time"})
    assert TOOL in [row["name"] for row in json.loads(found.content[0].text)["results"]]
    activated = await client.call_tool("activate_tool", {"names": [TOOL]})
    body = json.loads(activated.content[0].text)
    if client.protocol_version == "2026-07-28":  # its list stays put: the declaration is here
        assert [d["name"] for d in body["declarations"]] == [TOOL]
        assert {t.name for t in await client.list_tools()} == names
        called = await client.call_tool("call_tool", {"name": TOOL,
                                                      "arguments": {"timezone": "UTC"}})
    else:
        assert body["activated"] == [TOOL]
        tools = {t.name: t for t in await client.list_tools()}
        assert tools[TOOL].annotations.read_only_hint is True
        called = await client.call_tool(TOOL, {"timezone": "UTC"})
    assert called.is_error is False
    assert called.structured_content["timezone"] == "UTC"

    async def via(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return _wire(await client.call_tool("call_tool", {"name": name,
                                                          "arguments": arguments}))

    assert json.loads((await via(TOOL, {"timezone": "Asia/Tokyo"}))["content"][0]["text"])[
        "timezone"] == "Asia/Tokyo"
    ref = check_doc(await via("blocks__doc", {}))
    check_saved(await via("blocks__save", {"path": str(out), "text": ref}), out)
    check_mixed(await via("blocks__mixed", {}))
    logs.clear()
    assert (await via("blocks__logged", {}))["content"][0]["text"] == "logged three lines"
    assert logs == LOGGED


def _logs() -> tuple[list[tuple[str | None, Any]], Any]:
    logs: list[tuple[str | None, Any]] = []

    async def on_log(message: Any) -> None:
        logs.append((message.logger, message.data))

    return logs, on_log


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_fastmcp_client_over_stdio(world: World, generation: str) -> None:
    fastmcp = _fastmcp()
    from fastmcp.client.transports import StdioTransport

    command, *args = stdio_gateway(world.root)
    transport = StdioTransport(command, args, env=dict(os.environ), keep_alive=False,
                               log_file=world.log)
    logs, on_log = _logs()
    with anyio.fail_after(scaled(120)):
        async with fastmcp.Client(transport, log_handler=on_log,
                                  mode=GENERATIONS[generation]) as client:
            assert client.protocol_version == generation
            await _fastmcp_round(client, world.root / "copy.json", logs)


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_the_fastmcp_client_over_http(served: Served, tmp_path: Path,
                                            generation: str) -> None:
    fastmcp = _fastmcp()
    from fastmcp.client.transports import StreamableHttpTransport

    mode = GENERATIONS[generation]
    token = TOKENS["fastmcp" if mode == "auto" else "fastmcp-legacy"]
    logs, on_log = _logs()
    with anyio.fail_after(scaled(120)):
        async with fastmcp.Client(StreamableHttpTransport(served.url, auth=token),
                                  log_handler=on_log, mode=mode) as client:
            assert client.protocol_version == generation
            await _fastmcp_round(client, tmp_path / "copy.json", logs)


async def _ts_round(out: Path, *target: str) -> dict[str, Any]:
    """The TypeScript SDK client's round (fixtures/ts_client.mjs) against the gateway."""
    node = node_client(TS_SDK, "@modelcontextprotocol/sdk (the TypeScript SDK)")
    done = await anyio.run_process(
        [node, str(FIXTURES / "ts_client.mjs"), target[0], str(out), TOOL, "current time",
         *target[1:]], check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    seen: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["server"] == "byref-gateway"
    assert set(seen["first"]) >= SCAFFOLD
    assert TOOL not in seen["first"]
    assert TOOL in seen["found"]
    assert seen["activated"] == [TOOL]
    assert TOOL in seen["second"]
    assert seen["readOnly"] is True
    assert seen["called"]["isError"] is False
    assert seen["called"]["body"]["timezone"] == "UTC"
    assert seen["called"]["structured"]["timezone"] == "UTC"
    assert seen["via"]["timezone"] == "Asia/Tokyo"
    check_doc(seen["doc"])
    check_saved(seen["saved"], out)
    check_mixed(seen["mixed"])
    assert seen["logged"]["content"][0]["text"] == "logged three lines"
    assert [tuple(line) for line in seen["logs"]] == LOGGED
    return seen


async def test_the_typescript_sdk_client_over_stdio(world: World) -> None:
    with anyio.fail_after(scaled(120)):
        await _ts_round(world.root / "copy.json", "stdio", *stdio_gateway(world.root))


async def test_the_typescript_sdk_client_over_http(served: Served, tmp_path: Path) -> None:
    with anyio.fail_after(scaled(120)):
        await _ts_round(tmp_path / "copy.json", "http", served.url, TOKENS["typescript"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_typescript_sdk_client_in_the_2026_generation(transport: str) -> None:
    node_client(TS_SDK, "@modelcontextprotocol/sdk (the TypeScript SDK)")
    pytest.skip("@modelcontextprotocol/sdk 1.32.2 speaks protocol versions up to 2025-11-25 "
                "(SUPPORTED_PROTOCOL_VERSIONS); its 2026-07-28 logs cannot be asked for")
