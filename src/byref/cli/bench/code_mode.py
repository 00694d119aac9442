"""`byref bench code-mode [--calls N] [--rounds N] [--json]`: the 40-item scenario call by call
against one run_code program (turns, characters, the report byte-identical), and an inner call's
cost against a direct dispatch."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench code-mode` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "code-mode", help="code mode: a 40-item scenario call by call vs one run_code program, "
                          "and an inner call's overhead")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench code-mode`: print the figures; returns the exit code (1 if the two reports
    differ)."""
    from byref.bench.code.code_mode import bench_code_mode, format_report

    report = bench_code_mode(args.calls, args.rounds)
    print(json.dumps(report) if args.json else format_report(report))
    return 0 if report["report_identical"] else 1
