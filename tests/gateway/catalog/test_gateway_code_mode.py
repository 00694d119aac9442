"""Code mode at the gateway (`byref.codeMode`): run_code offered to MCP clients, behind search;
the program calls upstream tools through the scope's own call walk.

Real servers: tests/gateway/fixtures/code_server.py over stdio and over streamable HTTP, the
gateway driven by the official `mcp` client in process and over HTTP.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from _code_rig import _sandbox, code_server  # noqa: F401 (an autouse fixture)
from _gateway_rig import FIXTURES, World, announced_url, ref_line_of, running, served, text_blocks
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway.config.file import ConfigError, parse_config

sys.path.insert(0, str(FIXTURES))
from code_server import export_text

pytestmark = pytest.mark.anyio
TOKEN = "code-mode-token-0123456789abcdef"


async def _run(client: Client, code: str) -> tuple[str, str]:
    """run_code's summary line and what the program printed (one text block, then its ref
    line)."""
    result = await client.call_tool("run_code", {"code": code})
    texts = text_blocks(result)
    assert not result.is_error, texts
    assert ref_line_of(result) is not None and len(texts) == 2, texts
    summary, printed = texts[0].split("\n", 1)
    return summary, printed


def test_code_mode_is_off_unless_configured_and_checked() -> None:
    config = parse_config({"mcpServers": {"x": {"command": "x"}}}, source="c")
    assert config.code_mode == "off"
    assert parse_config({"mcpServers": {"x": {"command": "x"}}, "byref": {
        "codeMode": "readOnly"}}, source="c").code_mode == "readOnly"
    with pytest.raises(ConfigError, match=r"byref.codeMode must be 'off', 'readOnly' or 'all', "
                                          r"got 'yes'\."):
        parse_config({"mcpServers": {"x": {"command": "x"}}, "byref": {"codeMode": "yes"}},
                     source="c")


async def test_off_by_default_run_code_is_nowhere_and_direct_mode_declares_it(
        world: World, tmp_path: Path) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, code_server(tmp_path)) as (gateway, server), Client(server) as c:
            box = await gateway.toolbox()
            assert "run_code" not in box.catalog
            found = await c.call_tool("search_tools", {"query": "run a python program"})
            assert "run_code" not in " ".join(text_blocks(found))
        async with running(world, code_server(tmp_path), mode="direct", codeMode="readOnly") as (
                gateway, server), Client(server) as c:
            await gateway.toolbox()  # direct mode declares every catalog tool, run_code too
            assert "run_code" in {t.name for t in (await c.list_tools()).tools}


async def test_an_upstream_tool_called_from_code_over_stdio(world: World,
                                                             tmp_path: Path) -> None:
    code = """
import json
found = [row["name"] for row in tools.search("stock of an item by sku")]
print("found", "code__lookup" in found)
rows = tools.gather([("code__lookup", {"sku": s}) for s in ("A-1", "B-22", "C-333")])
print(sorted(r["stock"] for r in rows))  # the upstream's structuredContent, as a value
print(repr(tools.code__export(kilobytes=1))[:20])  # a plain text result: its text
"""
    stocks = sorted(sum(map(ord, s)) % 50 for s in ("A-1", "B-22", "C-333"))
    with anyio.fail_after(scaled(120)):
        async with running(world, code_server(tmp_path), codeMode="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()  # settled: the upstream listed
            declared = {t.name for t in (await client.list_tools()).tools}
            assert "run_code" not in declared  # behind search
            found = await client.call_tool("search_tools", {"query": "run a python program"})
            assert "run_code" in " ".join(text_blocks(found))
            activated = await client.call_tool("activate_tool", {"names": ["run_code"]})
            assert not activated.is_error, text_blocks(activated)
            listed = {t.name for t in (await client.list_tools()).tools}
            if client.protocol_version == "2026-07-28":  # its list stays put: declared here
                body = json.loads(text_blocks(activated)[0])
                assert [d["name"] for d in body["declarations"]] == ["run_code"]
                assert listed == declared
            else:
                assert "run_code" in listed
            summary, printed = await _run(client, code)
            assert summary.startswith("[run_code] 4 tool calls (code__lookup ×3, code__export "
                                      "×1); none refused; record art_"), summary
            assert printed.splitlines() == ["found True", str(stocks),
                                            repr(export_text(1))[:20]], printed
            # Lineage: the conversation holds run_code's call and result, not the inner calls;
            # its record (named in the summary) holds them under ids <run id>.<n>.
            state = gateway.scopes.all()[0]
            made = [(p.tool, p.call_id) for m in state.transcript for p in m.parts
                    if p.type == "tool_call"]
            assert "code__lookup" not in {name for name, _ in made}
            assert made[-1][0] == "run_code"
            run_id = made[-1][1]
            record = summary.split("record ", 1)[1].rstrip(".")
            lines = gateway.store.get(state.store_scope, record)
            assert lines is not None
            calls = [json.loads(line) for line in lines.data.decode().splitlines()]
            inner = [p for m in calls for p in m["parts"] if p["type"] == "tool_call"]
            assert [(p["call_id"], p["tool"]) for p in inner] == [
                (f"{run_id}.{n}", "code__lookup") for n in (1, 2, 3)] + [
                (f"{run_id}.4", "code__export")]


async def test_ten_megabytes_pass_between_inner_calls_without_entering_the_child(
        world: World, tmp_path: Path) -> None:
    code = """
import resource
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
export = tools.code__export(kilobytes=10 * 1024)
digest = tools.code__digest(text=export)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
whole = export.read()  # the control: the same data read whole does show in the peak
read_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"handle": type(export).__name__, "bytes": export.bytes,
                  "digest": digest, "read": len(whole),
                  "base_kb": base, "peak_kb": peak, "read_peak_kb": read_peak}))
"""
    expected = export_text(10 * 1024).encode()
    assert len(expected) == 10 << 20
    with anyio.fail_after(scaled(180)):
        async with running(world, code_server(tmp_path), codeMode="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            summary, printed = await _run(client, "import json\n" + code)
            seen = json.loads(printed)
            assert seen["handle"] == "Handle" and seen["bytes"] == len(expected)
            assert seen["digest"] == {"bytes": len(expected),
                                      "sha256": hashlib.sha256(expected).hexdigest()}
            grown = seen["peak_kb"] - seen["base_kb"]
            print(f"child peak RSS: baseline {seen['base_kb']} KiB, after the pass "
                  f"{seen['peak_kb']} KiB (+{grown} KiB), after reading it whole "
                  f"{seen['read_peak_kb']} KiB")
            assert grown < 2 * 1024, seen  # the 10 MiB never whole in the child
            assert seen["read"] == len(expected)
            assert seen["read_peak_kb"] - seen["base_kb"] >= 10 * 1024, seen  # it would show
            assert "code__export ×1" in summary and "code__digest ×1" in summary


async def test_a_tool_that_may_change_things_is_refused_from_code_as_call_tool_refuses_it(
        world: World, tmp_path: Path) -> None:
    code = """
try:
    tools.code__delete_item(sku="A-1")
except tools.ToolError as exc:
    print(exc.reason)
    print(exc.text)
"""
    with anyio.fail_after(scaled(120)):
        async with running(world, code_server(tmp_path), codeMode="all", callTool="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            model = await client.call_tool("call_tool", {
                "name": "code__delete_item", "arguments": {"sku": "A-1"}})
            assert model.is_error
            summary, printed = await _run(client, code)
            reason, words = printed.split("\n", 1)
            assert reason == "not-permitted"
            assert words.strip() == text_blocks(model)[0]
            assert "refused: code__delete_item (not-permitted) ×1" in summary
            assert not (tmp_path / "deleted.log").exists()  # it never ran


async def test_code_mode_read_only_refuses_what_may_change_things_and_all_calls_it(
        world: World, tmp_path: Path) -> None:
    code = """
try:
    print(tools.code__delete_item(sku="Z-9"))
except tools.ToolError as exc:
    print(exc.reason, exc.text)
try:
    tools.activate_tool(names=["code__lookup"])
except tools.ToolError as exc:
    print(exc.reason, exc.text)
"""
    log = tmp_path / "deleted.log"
    with anyio.fail_after(scaled(120)):
        async with running(world, code_server(tmp_path), codeMode="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            _summary, printed = await _run(client, code)
            lines = printed.splitlines()
            assert lines[0] == (
                "not-permitted Tool 'code__delete_item' was not called: code calls only "
                "read-only tools here (byref.codeMode is 'readOnly'); 'code__delete_item' may "
                "change things: load it with activate_tool and call it by its own name, so your "
                "client can ask the user first.")
            assert lines[1].startswith("not-permitted Tool 'activate_tool' was not called: it "
                                       "is the model's, not code's")
            assert not log.exists()
        async with running(world, code_server(tmp_path), codeMode="all") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            _summary, printed = await _run(client, code)
            assert printed.splitlines()[0] == "deleted Z-9"
            assert log.read_text() == "Z-9\n"


async def test_an_upstream_over_http_called_from_code_by_a_client_over_http(
        world: World, tmp_path: Path) -> None:
    code = """
import json
stock = tools.remote__lookup(sku="H-7")["stock"]
print(stock, len(tools.remote__export(kilobytes=4096).read()))
"""
    with anyio.fail_after(scaled(120)):
        async with await anyio.open_process(
                [sys.executable, str(FIXTURES / "code_server.py"), "--http"],
                stderr=subprocess.PIPE) as upstream:
            try:
                assert upstream.stderr is not None
                remote = await announced_url(upstream.stderr)
                tokens = {TOKEN: {"tenant": "acme", "principal": "alice"}}
                async with served(world, {"remote": {"url": remote, "timeout": scaled(30)}},
                                  tokens=tokens, codeMode="readOnly") as (gateway, url):
                    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
                    async with Client(streamable_http_client(url, http_client=http)) as client:
                        await gateway.toolbox()
                        result = await client.call_tool("call_tool", {
                            "name": "run_code", "arguments": {"code": code}})
                        texts = text_blocks(result)
                        assert not result.is_error, texts
                        summary, printed = texts[0].split("\n", 1)
                        assert summary.startswith("[run_code] 2 tool calls (remote__lookup ×1, "
                                                  "remote__export ×1); none refused;"), summary
                        assert printed == f"{sum(map(ord, 'H-7')) % 50} {4096 << 10}\n"  # > 1 MiB
            finally:
                upstream.terminate()


async def test_code_reaches_only_what_the_grant_lets_its_caller_see(
        world: World, tmp_path: Path) -> None:
    limited, no_code = "code-limited-token-0123456789abcd", "code-nocode-token-0123456789abcde"
    tokens = {TOKEN: {"tenant": "acme", "principal": "full"},
              limited: {"tenant": "acme", "principal": "limited",
                        "tools": ["code__lookup", "run_code"]},
              no_code: {"tenant": "acme", "principal": "plain", "tools": ["code__*"]}}
    code = """
import json
print(tools.code__lookup(sku="G-1")["stock"])
for name in ("code__export", "other__lookup"):
    try:
        tools.call(name, {"kilobytes": 1} if name.endswith("export") else {"sku": "G-1"})
        print(name, "called")
    except tools.ToolError as exc:
        print(name, exc.reason, exc.text.splitlines()[0])
"""
    servers = {"code": code_server(tmp_path)["code"], "other": code_server(tmp_path)["code"]}
    with anyio.fail_after(scaled(120)):
        async with served(world, servers, tokens=tokens, codeMode="readOnly") as (
                gateway, url):
            await gateway.toolbox()
            for token, hidden in ((TOKEN, False), (limited, True)):
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    result = await client.call_tool("call_tool", {
                        "name": "run_code", "arguments": {"code": code}})
                    texts = text_blocks(result)
                    assert not result.is_error, texts
                    printed = texts[0].split("\n", 1)[1]
                    stock = sum(map(ord, "G-1")) % 50
                    lines = printed.splitlines()
                    assert lines[0] == str(stock)
                    for line, name in zip(lines[1:], ("code__export", "other__lookup"),
                                          strict=True):
                        assert line.startswith(f"{name} unknown-tool There is no tool {name!r}."
                                               if hidden else f"{name} called"), line
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {no_code}"})
            async with Client(streamable_http_client(url, http_client=http)) as client:
                refused = await client.call_tool("call_tool", {
                    "name": "run_code", "arguments": {"code": code}})
                words = text_blocks(refused)[0]
                assert refused.is_error and "'run_code'" in words, words
                assert words.endswith("Find tools with search_tools."), words


async def test_the_gateways_lens_shows_a_code_run_with_its_inner_calls(
        world: World, tmp_path: Path) -> None:
    import re
    import urllib.request

    code = """
import json
rows = tools.gather([("code__lookup", {"sku": s}) for s in ("L-1", "L-2")])
print(len(rows))
"""

    def get(url: str) -> str:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=scaled(60)) as response:
            body: str = response.read().decode()
            return body

    tokens = {TOKEN: {"tenant": "acme", "principal": "alice"}}
    with anyio.fail_after(scaled(120)):
        async with served(world, code_server(tmp_path), tokens=tokens, codeMode="readOnly",
                          store=f"file://{tmp_path / 'store'}") as (gateway, url):
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await gateway.toolbox()
                result = await client.call_tool("call_tool", {
                    "name": "run_code", "arguments": {"code": code}})
                assert not result.is_error, text_blocks(result)
            base = url.removesuffix("/mcp")
            index = await anyio.to_thread.run_sync(get, f"{base}/lens/")
            [conv] = re.findall(r'href="(/lens/c/[^"]+/)"', index)
            page = await anyio.to_thread.run_sync(get, f"{base}{conv}")
            [run_id] = re.findall(r'id="inner-([^"]+)"', page)
            assert "inner calls from code (2)" in page
            assert f"{run_id}.1" in page and f"{run_id}.2" in page
            assert page.count("code__lookup") >= 2


@pytest.mark.parametrize("loop", ["auto", "asyncio"])
async def test_byref_gateway_over_stdio_runs_code_that_calls_its_upstream(
        world: World, tmp_path: Path, loop: str) -> None:
    import os

    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": code_server(tmp_path),
                                  "byref": {"codeMode": "readOnly"}}))
    code = """
import json
big = tools.code__export(kilobytes=512)
print(tools.code__digest(text=big)["bytes"], big.bytes)
"""
    with anyio.fail_after(scaled(120)), world.log.open("a") as errlog:
        async with Client(stdio_client(StdioServerParameters(
                command=sys.executable, args=["-m", "byref.cli", "gateway", "--config",
                                              str(config), "--loop", loop],
                env=dict(os.environ)), errlog=errlog)) as client:
            result = await client.call_tool("call_tool", {
                "name": "run_code", "arguments": {"code": code}})
            texts = text_blocks(result)
            assert not result.is_error, texts
            summary, printed = texts[0].split("\n", 1)
            assert summary.startswith("[run_code] 2 tool calls (code__export ×1, code__digest "
                                      "×1); none refused;"), summary
            assert printed == f"{512 << 10} {512 << 10}\n"
