"""`byref hookup --config FILE [--name NAME] [--json]`: the lines that put the gateway in a client.

Prints, for this installation, the `claude mcp add` line for Claude Code and the `mcpServers` entry
for Claude Desktop, Cursor and other clients' JSON files, with absolute paths: the `byref` that
runs this command (a client starts it with its own PATH, which may not hold ~/.local/bin) and the
config file. The law: nothing is printed that would fail when pasted — the config is read as the
gateway reads it, each server's command must be found, and the MCP SDK must import, else a
one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add the `hookup` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "hookup", help="print the line that adds the gateway to Claude Code, Claude Desktop or "
        "Cursor (absolute paths, checked)",
        description="Print how to point an MCP client at `byref gateway --config FILE`, with "
        "this installation's absolute paths: the `claude mcp add` line and the mcpServers entry.")
    parser.add_argument("--config", required=True, metavar="FILE",
                        help="the gateway's config (mcpServers JSON)")
    parser.add_argument("--name", default="byref", help="the server's name in the client "
                        "(default: byref)")
    parser.add_argument("--json", action="store_true",
                        help="print only the mcpServers JSON for a client's config file")
    parser.set_defaults(run=run)


def command() -> list[str]:
    """The absolute command that starts this installation's byref: the `byref` script beside
    the running Python (a venv's bin/, not resolved: the venv's python is a symlink out of it),
    else that Python running the CLI module."""
    script = Path(sys.executable).parent / "byref"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "byref.cli"]


def _runnable(command: str, cwd: str | None, env: dict[str, str]) -> bool:
    """Whether `command` names a program the gateway could start: on PATH (the server's own, if
    its env sets one), or a path to an executable file (relative: from its `cwd`)."""
    if os.sep in command:
        path = Path(cwd or Path.cwd()) / Path(command).expanduser()
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(command, path=env.get("PATH", os.environ.get("PATH"))) is not None


def run(args: argparse.Namespace) -> int:
    """`byref hookup`: check the config and the gateway's dependencies, print the client lines;
    returns the exit code (2: they would not work)."""
    from byref.errors import install_hint

    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError:
        print(f"byref hookup: the gateway needs the MCP SDK, which is not installed; run: "
              f"{install_hint('mcp')}", file=sys.stderr)
        return 2
    from byref.gateway import ConfigError, load_config

    config = Path(args.config).expanduser().absolute()
    try:
        loaded = load_config(config)
    except ConfigError as exc:
        print(f"byref hookup: {exc}", file=sys.stderr)
        return 2
    for server in loaded.servers:
        if server.command is not None and not _runnable(server.command, server.cwd, server.env):
            print(f"byref hookup: server {server.name!r} in {str(config)!r} would not start: its "
                  f"command {server.command!r} is not found (not on PATH, nor a file from "
                  f"{server.cwd or str(Path.cwd())!r}); install it or fix 'command'.",
                  file=sys.stderr)
            return 2
    argv = [*command(), "gateway", "--config", str(config)]
    entry = {"mcpServers": {args.name: {"command": argv[0], "args": argv[1:]}}}
    if args.json:
        print(json.dumps(entry, indent=2))
        return 0
    print("Claude Code:")
    print(f"  claude mcp add {shlex.quote(args.name)} -- {shlex.join(argv)}")
    print("Claude Desktop (claude_desktop_config.json), Cursor (~/.cursor/mcp.json) and other "
          "mcpServers files:")
    print(f"  {json.dumps(entry)}")
    return 0
