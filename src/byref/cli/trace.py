"""`byref trace PATH`: read an event trace (JSON lines), as a table or as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from byref.errors import InvalidValue

_COLUMNS = ("tool", "op", "reason", "ref", "kind", "bytes")


def register(sub: Any) -> None:
    """Add the `trace` command to the CLI's subparsers."""
    parser = sub.add_parser("trace", help="show an event trace written as JSON lines")
    parser.add_argument("path", type=Path)
    parser.add_argument("--json", action="store_true", help="print the events as a JSON array")
    parser.add_argument("--event", action="append", default=[],
                        help="only events with this name (repeatable)")
    parser.set_defaults(run=run)


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The events of a JSON Lines trace; raises `ValueError` naming the line that does not parse."""
    events = []
    with path.open() as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InvalidValue(f"{str(path)!r} line {number} is not JSON: {exc.msg}") from exc
    return events


def run(args: argparse.Namespace) -> int:
    """`byref trace`: print a trace's events, optionally only some names; returns the exit code."""
    try:
        events = read_trace(args.path)
    except (OSError, ValueError) as exc:
        print(f"byref trace: {exc}", file=sys.stderr)
        return 2
    if args.event:
        events = [e for e in events if e.get("event") in args.event]
    if args.json:
        print(json.dumps(events, indent=2))
        return 0
    start = events[0]["at"] if events else 0.0
    for e in events:
        fields = "  ".join(f"{k}={e[k]}" for k in _COLUMNS if e.get(k) is not None)
        print(f"+{e['at'] - start:8.3f}s  {e['event']:<10} {fields}")
    return 0
