"""`byref bench run-python [--rounds N] [--json]`: a trivial run_python call's cost, bare,
unisolated and sandboxed, as ratios to the bare interpreter start measured in the same run."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench run-python` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "run-python", help="run_python: a trivial call's cost, bare vs unisolated vs sandboxed")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench run-python`: print the figures; returns the exit code."""
    from byref.bench.code.run_python import bench_run_python, format_report

    report = bench_run_python(args.rounds)
    print(json.dumps(report) if args.json else format_report(report))
    return 0
