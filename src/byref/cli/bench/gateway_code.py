"""`byref bench gateway-code [--calls N] [--rounds N] [--json]`: code mode at the gateway — N
upstream calls one by one against one run_code making them, and a 10 MiB pass between inner
calls with the sandboxed program's peak RSS."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench gateway-code` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "gateway-code", help="code mode at the gateway: upstream calls one by one vs from one "
                             "run_code, and a 10 MiB pass by handle (the child's peak RSS)")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench gateway-code`: print the figures; returns the exit code (1 where no
    sandbox can be made)."""
    from byref.bench.gateway.code import bench_gateway_code, format_report

    try:
        report = bench_gateway_code(max(1, args.calls), max(1, args.rounds))
    except RuntimeError as exc:
        print(f"byref bench gateway-code: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report) if args.json else format_report(report))
    return 0
