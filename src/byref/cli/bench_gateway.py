"""`byref bench gateway`: per-call overhead of the gateway and the first-turn tool surface.

Registered by the `bench` command group. Needs the reference servers `make test` installs
(mcp-server-time, mcp-server-git, mcp-server-sqlite in .venv-sqlite, the npm filesystem server);
those missing are named in the output and left out of both sides of the comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register_bench(bench_sub: Any) -> None:
    parser = bench_sub.add_parser(
        "gateway", help="per-call overhead of byref gateway over a direct stdio call, and the "
        "first-turn tool surface with and without it")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per side")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        from byref.gateway.bench import gateway_bench
    except ModuleNotFoundError as exc:
        print(f"byref bench gateway: {exc.name!r} is not installed; run: pip install "
              "'byref[mcp]'", file=sys.stderr)
        return 2
    if args.calls < 1:
        print(f"byref bench gateway: --calls must be at least 1, got {args.calls!r}",
              file=sys.stderr)
        return 2
    report = gateway_bench(calls=args.calls)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    over = report.get("overhead")
    if over:
        print(f"per call ({over['upstream']}, {over['calls']} calls): direct p50 "
              f"{over['direct_p50_ms']} ms, p95 {over['direct_p95_ms']} ms; through the gateway "
              f"p50 {over['gateway_p50_ms']} ms, p95 {over['gateway_p95_ms']} ms; ratio p50 "
              f"{over['ratio_p50']}×, p95 {over['ratio_p95']}×")
    turn = report.get("first_turn")
    if turn:
        print(f"first turn: {turn['direct_tools']} tools declared directly = "
              f"{turn['direct_tokens']:,} tokens ({turn['direct_chars']:,} chars); through the "
              f"gateway {turn['gateway_tools']} tools + instructions = {turn['gateway_tokens']:,} "
              f"tokens ({turn['gateway_chars']:,} chars); ratio {turn['ratio_tokens']}")
    for name, why in report.get("missing", {}).items():
        print(f"missing {name}: {why}")
    return 0
