"""`byref bench refline [--calls N] [--size BYTES] [--protocol legacy|2026-07-28] [--json]`: the
model-visible cost of a result's ref line, against FastMCP's answer to the same tool."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench refline` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "refline", help="the ref line's tokens per result, and the bytes a model is shown of "
        "an echo answer, against FastMCP's same tool in the same run")
    parser.add_argument("--calls", type=int, default=200, help="calls in each session")
    parser.add_argument("--size", type=int, default=199, help="bytes of the echoed text")
    parser.add_argument("--protocol", choices=("legacy", "2026-07-28"), default="legacy")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench refline`: both sessions and their figures; returns the exit code."""
    from byref.bench.gateway.refline import format_report, refline_bench

    if args.calls < 1 or args.size < 1:
        raise SystemExit("error: --calls and --size must be at least 1")
    report = refline_bench(args.calls, args.size, args.protocol)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
