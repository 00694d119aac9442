"""`byref gateway` as a process: the official client over stdio and over HTTP, the CLI's
one-line errors, the config file's checks, and `byref bench gateway --json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import World, announced_url, text
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.errors import install_hint
from byref.gateway.config.file import ConfigError, load_config, parse_config

TOKEN = "a-long-random-token-for-tests-0001"


def _config(world: World, servers: dict[str, Any], **byref: Any) -> Path:
    path = world.root / "gateway.json"
    path.write_text(json.dumps({"mcpServers": servers, "byref": byref}))
    return path


def _gateway(*args: str) -> list[str]:
    return [sys.executable, "-m", "byref.cli", "gateway", *args]


@pytest.mark.anyio
@pytest.mark.parametrize("loop", ["auto", "asyncio"])
async def test_the_official_client_over_stdio(world: World, loop: str) -> None:
    config = _config(world, world.need("time", "git"), scope="me")
    command, *args = _gateway("--config", str(config), "--store", f"file://{world.root}/store",
                              "--loop", loop)
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with Client(stdio_client(StdioServerParameters(
                command=command, args=args, env=dict(os.environ)), errlog=errlog)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"search_tools", "activate_tool", "call_tool"} <= names
            result = await client.call_tool("call_tool", {
                "name": "git__git_log", "arguments": {"repo_path": str(world.repo),
                                                      "max_count": 1}})
            assert not result.is_error, text(result)
            assert "Add note 2" in text(result)


def test_the_event_loop_is_uvloop_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from byref.cli.gateway import loop_options

    installed = importlib.util.find_spec("uvloop") is not None
    assert loop_options("auto") == ({"use_uvloop": True} if installed else {})
    assert loop_options("asyncio") == {}
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if it were not installed
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert loop_options("auto") == {}
    with pytest.raises(ModuleNotFoundError):
        loop_options("uvloop")


def test_asking_for_uvloop_without_it_is_a_one_line_error(world: World) -> None:
    config = _config(world, {})
    code = ("import sys; sys.modules['uvloop'] = None; from byref.cli import main; "
            f"sys.exit(main(['gateway', '--config', {str(config)!r}, '--loop', 'uvloop']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=scaled(60))
    assert done.returncode == 2, done
    assert done.stderr == ("byref gateway: --loop uvloop needs uvloop (in the mcp extra): "
                           f"{install_hint('mcp')}\n")


@pytest.mark.anyio
async def test_the_official_client_over_http(world: World) -> None:
    config = _config(world, world.need("time"),
                     tokens={TOKEN: {"tenant": "t", "principal": "p"}})
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with await anyio.open_process(
                _gateway("--config", str(config), "--transport", "http", "--port", "0"),
                stderr=subprocess.PIPE, stdout=errlog) as process:
            try:
                assert process.stderr is not None
                url = await announced_url(process.stderr)
                assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
                http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    result = await client.call_tool("call_tool", {
                        "name": "time__get_current_time", "arguments": {"timezone": "UTC"}})
                    assert json.loads(text(result))["timezone"] == "UTC"
            finally:
                process.terminate()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_gateway(*args), capture_output=True, text=True, timeout=scaled(60),
                          stdin=subprocess.DEVNULL)


@pytest.mark.process
def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = _run("--config", str(tmp_path / "none.json"))
    assert (missing.returncode, missing.stderr) == (
        2, f"byref gateway: Config file {str(tmp_path / 'none.json')!r} does not exist.\n")
    config = tmp_path / "g.json"
    config.write_text(json.dumps({"mcpServers": {"t": {"command": "x"}}}))
    http = _run("--config", str(config), "--transport", "http")
    assert http.returncode == 2
    assert http.stderr.startswith(f"byref gateway: Config {str(config)!r} has no byref.tokens")
    store = _run("--config", str(config), "--store", "ftp://nowhere")
    assert store.returncode == 2
    assert store.stderr.startswith("byref gateway: Unknown store URL 'ftp://nowhere'")


def test_config_reads_the_mcp_servers_shape(tmp_path: Path) -> None:
    path = tmp_path / "claude.json"
    path.write_text(json.dumps({"mcpServers": {
        "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"A": "1"}, "cwd": "sub",
                "disabled": False, "alwaysAllow": []},
        "remote": {"type": "http", "url": "https://example.com/mcp",
                   "headers": {"X-Key": "k"}, "timeout": 5}},
        "byref": {"scope": "me", "timeout": 30, "workingSet": 4, "usage": "usage.jsonl"}}))
    config = load_config(path)
    assert config.usage == tmp_path / "usage.jsonl"  # beside the config file
    git, remote = config.servers
    assert (git.command, git.args, git.env, git.cwd, git.timeout) == (
        "uvx", ("mcp-server-git",), {"A": "1"}, str(tmp_path / "sub"), 30.0)
    assert (remote.transport, remote.url, remote.headers, remote.timeout) == (
        "http", "https://example.com/mcp", {"X-Key": "k"}, 5.0)
    assert (config.scope, config.working_set) == ("me", 4)


@pytest.mark.parametrize(("raw", "message"), [
    ({"mcpServers": {}}, "Config 'c' needs 'mcpServers': an object of server name"),
    ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}},
     "Config 'c' server 'a' needs exactly one of 'command' (a program to start) or 'url'"),
    ({"mcpServers": {"a b": {"command": "x"}}}, "Config 'c': server name 'a b' must be"),
    ({"mcpServers": {"a": {"command": "x", "args": "-v"}}},
     "Config 'c' server 'a': 'args' must be a list of strings, got '-v'."),
    ({"mcpServers": {"a": {"command": "x"}}, "byref": {"scop": "me"}},
     "Config 'c': unknown 'byref' key(s) 'scop'; accepted: "),
    ({"mcpServers": {"a": {"command": "x", "timeout": 0}}},
     "Config 'c' server 'a' timeout must be a positive number, got 0."),
    ({"mcpServers": {"a": {"command": "x"}}, "byref": {"tokens": {"short": {}}}},
     "Config 'c': byref.tokens entry #1 is shorter than 16 characters"),
    ({"mcpServers": {"a": {"command": "x"}}, "byref": {"usage": 3}},
     "Config 'c': byref.usage must be a file path string, got 3."),
    ({"mcpServers": {"a": {"url": "ftp://h"}}},
     "Config 'c' server 'a': 'url' must be an http:// or https:// URL, got 'ftp://h'."),
])
def test_config_errors_name_where_and_what_fits(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, source="c")
    assert str(caught.value).startswith(message)
