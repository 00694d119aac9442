"""`byref bench code-start [--rounds N] [--json]`: an empty run_code at the gateway, cold and
warm, and 0/1/3/10 inner calls end to end, against FastMCP's CodeMode in the same run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench code-start` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "code-start", help="run_code's start at the gateway, cold vs warm, and 0/1/3/10 inner "
                           "calls, against FastMCP's CodeMode (pydantic-monty)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench code-start`: print the figures; returns the exit code (1 where no sandbox
    can be made or the baseline cannot run)."""
    from byref.bench.gateway.code_start import bench_code_start, format_report

    try:
        report = bench_code_start(max(4, args.rounds))
    except RuntimeError as exc:
        print(f"byref bench code-start: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report))
    return 0
