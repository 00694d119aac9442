"""`byref bench conversations [--url NAME=URL] [--json]`: the conversation-state port's cost per
gateway call (memory and SQLite by default; PostgreSQL at BYREF_BENCH_POSTGRES_URL when set)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench conversations` to the bench subcommands."""
    parser = bench_subparsers.add_parser(
        "conversations", help="conversation state: cost per gateway call against the in-memory "
        "record, resume time, RSS of a long conversation")
    parser.add_argument("--url", action="append", default=[], metavar="NAME=URL",
                        help="an implementation to measure (repeatable; {tmp} is a temporary "
                        "directory); default: memory, sqlite")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--quick", action="store_true", help="a smoke run in a second or two")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench conversations`: cost per gateway call, resume time and RSS for each
    conversation-state implementation; returns the exit code."""
    from byref.bench.library.conversations import bench_conversations, format_report

    urls = {"memory": "memory://", "sqlite": "sqlite:///{tmp}/state.db"}
    if os.environ.get("BYREF_BENCH_POSTGRES_URL"):
        base = os.environ["BYREF_BENCH_POSTGRES_URL"]
        urls["postgres"] = f"{base}{'&' if '?' in base else '?'}table=bench_conversations"
    for item in args.url:
        name, sep, url = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --url expects NAME=URL, got {item!r}")
        urls[name] = url
    quick = {"calls": 20, "rounds": 2, "resume_messages": 100, "long_calls": 100}
    report = bench_conversations(urls, **(quick if args.quick else {"calls": args.calls}))
    print(json.dumps(report) if args.json else format_report(report))
    return 0
