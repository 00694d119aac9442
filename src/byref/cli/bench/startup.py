"""`byref bench startup [--spawns N] [--json]`: CPU and wall time from a stdio server's spawn to
its first `initialize` and `tools/list` answers — `byref gateway` (with and without its stdio
front) against a bare FastMCP and a bare official-SDK server, in the same run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from byref.cli.progress import progress


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench startup` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "startup", help="spawn → first initialize and tools/list answers over stdio: the "
                        "gateway against bare FastMCP and SDK servers (wall and CPU)")
    parser.add_argument("--spawns", type=int, default=7, help="starts per side [7]")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench startup`: print the figures; returns the exit code (2 without FastMCP)."""
    from importlib.util import find_spec

    if find_spec("fastmcp") is None:
        from byref.errors import install_hint

        print(f"byref bench startup: the FastMCP baseline needs fastmcp; run: "
              f"{install_hint('bench')}", file=sys.stderr)
        return 2
    from byref.bench.gateway.startup import format_report, startup_bench

    spawns = max(1, args.spawns)
    with progress("bench startup", spawns) as advance:
        report = startup_bench(spawns, tick=advance)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
