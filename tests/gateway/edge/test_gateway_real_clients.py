"""Clients no one here wrote, in front of `byref gateway`, the time server and the blocks fixture:
the MCP Inspector CLI (npm, one process per method) over stdio and HTTP lists, searches, activates
and calls a tool, sees a result of several blocks keep its shape and forwards a 196-byte JSON by
its ref line byte-exact; Claude Code (npm, `claude mcp add` + `claude mcp list`, no key needed)
connects and fetches the tools of a gateway whose server takes 7 s to start. The FastMCP and
TypeScript SDK clients are test_gateway_real_clients_sdks.py's. Each skips, saying why, where its
client is not installed (`make upstreams` installs them all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _gateway_rig import World
from _real_clients import (
    CLAUDE,
    FIXTURES,
    SCAFFOLD,
    TOKENS,
    TOOL,
    Served,
    body,
    check_doc,
    check_mixed,
    check_saved,
    inspector,
    node_client,
    served,
    stdio_gateway,
)
from _real_clients import gateway as _gateway

from _waits import scaled

__all__ = ["served"]  # the module's shared HTTP gateway (a fixture)
Run = Callable[..., dict[str, Any]]


def _inspect(cwd: Path, log: Path, *target: str) -> Run:
    """One Inspector CLI run per method against `target` (after the method's options)."""
    command = inspector()

    def run(*method: str) -> dict[str, Any]:
        with log.open("a") as errlog:
            done = subprocess.run([*command, *method, *target], stdout=subprocess.PIPE,
                                  stderr=errlog, text=True, timeout=scaled(90), cwd=cwd,
                                  stdin=subprocess.DEVNULL, env=dict(os.environ))
        assert done.returncode == 0, (done.returncode, done.stdout)
        out: dict[str, Any] = json.loads(done.stdout)
        return out

    return run


def _call(run: Run, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """`name` called through `call_tool` (the Inspector calls only a tool it lists)."""
    return run("--method", "tools/call", "--tool-name", "call_tool", "--tool-args-json",
               json.dumps({"name": name, "arguments": arguments}))


def _inspector_round(run: Run) -> None:
    """List, search, activate, list again, call by own name (call_tool: `_inspector_shapes`)."""
    names = [t["name"] for t in run("--method", "tools/list")["tools"]]
    assert set(names) >= SCAFFOLD
    assert TOOL not in names
    found = body(run("--method", "tools/call", "--tool-name", "search_tools",
                     "--tool-arg", "query=current time"))
    assert TOOL in [row["name"] for row in found["results"]]
    activated = body(run("--method", "tools/call", "--tool-name", "activate_tool",
                         "--tool-arg", f'names=["{TOOL}"]'))
    assert activated["activated"] == [TOOL]
    listed = {t["name"]: t for t in run("--method", "tools/list")["tools"]}
    assert listed[TOOL]["annotations"]["readOnlyHint"] is True
    called = run("--method", "tools/call", "--tool-name", TOOL, "--tool-arg", "timezone=UTC")
    assert called["isError"] is False, called
    assert body(called)["timezone"] == "UTC"
    assert called["structuredContent"]["timezone"] == "UTC"


def _inspector_shapes(run: Run, out: Path) -> None:
    """The document's ref, written into another run's call, resolves there; several blocks keep
    their shape; the log level is set."""
    ref = check_doc(_call(run, "blocks__doc", {}))
    check_saved(_call(run, "blocks__save", {"path": str(out), "text": ref}), out)
    check_mixed(_call(run, "blocks__mixed", {}))
    assert run("--method", "logging/setLevel", "--log-level", "debug") == {}


def test_the_mcp_inspector_cli_over_stdio(world: World) -> None:
    # Each run starts the gateway anew: the conversation (state beside the file store) carries
    # the activation and the refs from run to run. One server a gateway: a resumed conversation's
    # list waits 3 s at most for its activated tools' server, and every process starts them all.
    def over(server: str) -> Run:
        return _inspect(world.root, world.log, "--", *stdio_gateway(world.root, (server,)),
                        "--conversation", server)

    _inspector_round(over("time"))
    _inspector_shapes(over("blocks"), world.root / "copy.json")


def test_the_mcp_inspector_cli_over_http(served: Served, tmp_path: Path) -> None:
    run = _inspect(tmp_path, served.log, "--server-url", served.url, "--header",
                   f"Authorization: Bearer {TOKENS['inspector']}")
    _inspector_round(run)
    _inspector_shapes(run, tmp_path / "copy.json")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_mcp_inspector_cli_shows_log_lines(transport: str) -> None:
    inspector()
    pytest.skip("the Inspector CLI prints a tools/call's result alone, never the log lines that "
                "came with it (either protocol generation), and its logging/tail is a session of "
                "its own, to which the gateway never sends another session's log lines")


@pytest.mark.parametrize("mode", ["search", "direct"])
def test_claude_code_fetches_the_tools_while_a_server_takes_7_s_to_start(
        world: World, mode: str) -> None:
    """Claude Code cancels a tools/list after ~5 s: a gateway that waited for the slow server
    printed `! Connected · tools fetch failed — Request timed out` for all of its tools."""
    node_client(CLAUDE, "@anthropic-ai/claude-code (Claude Code)")  # it runs its own binary
    config = world.root / "slow.json"
    config.write_text(json.dumps({"mcpServers": {
        "late": {"command": sys.executable, "args": [str(FIXTURES / "late.py"), "sleep", "7"],
                 "timeout": scaled(30)}}, "byref": {"mode": mode}}))
    home = world.root / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    env.pop("ANTHROPIC_API_KEY", None)  # none is needed to add and check a server

    def claude_(*args: str) -> str:
        with world.log.open("a") as errlog:
            done = subprocess.run([str(CLAUDE), "mcp", *args], stdout=subprocess.PIPE,
                                  stderr=errlog, stdin=subprocess.DEVNULL, text=True,
                                  timeout=scaled(120), cwd=world.root, env=env)
        assert done.returncode == 0, done.stdout
        return done.stdout

    claude_("add", "byref", "--", *_gateway("--config", str(config)))
    listed = claude_("list")
    (line,) = [line for line in listed.splitlines() if line.startswith("byref:")]
    assert "✔ Connected" in line, listed
    assert "failed" not in line, listed
