"""`byref bench …`: benchmarks that print figures as ratios against a baseline from the same run.

Other areas plug in their own subcommands through `register_bench(bench_subparsers)` in the
modules listed below; a missing one is skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from byref.cli import plugins
from byref.demo.data import parse_size

_PLUGINS = ("byref.cli.bench_store", "byref.cli.bench_search", "byref.cli.bench_gateway")


def register(sub: Any) -> None:
    parser = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench = parser.add_subparsers(dest="bench", required=True)
    context = bench.add_parser(
        "context", help="model-visible characters, wall time and peak RSS of the byref round "
        "trip as the export grows")
    context.add_argument("--sizes", default="2MB,20MB,200MB")
    context.add_argument("--open", type=int, default=None, dest="open_items",
                         help="fix the number of open items (default: scale with the size)")
    context.add_argument("--json", action="store_true")
    context.set_defaults(run=run_context)
    dispatch = bench.add_parser("dispatch", help="per-call overhead of the dispatch pipeline, "
                                "as a ratio to calling the function directly")
    dispatch.add_argument("--json", action="store_true")
    dispatch.set_defaults(run=run_dispatch)
    for module in plugins(_PLUGINS):
        module.register_bench(bench)


def run_context(args: argparse.Namespace) -> int:
    from byref.demo.bench import context_bench

    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError as exc:
        print(f"byref bench context: {exc}", file=sys.stderr)
        return 2
    quiet = not sys.stderr.isatty()
    report = context_bench(
        sizes, open_items=args.open_items,
        progress=None if quiet else (lambda m: print(f"… {m}", file=sys.stderr)),
    )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"idle child RSS: {report['idle_rss_mib']} MiB")
    print(f"{'export':>14}{'visible chars':>15}{'tokens':>8}{'×smallest':>11}{'wall s':>9}"
          f"{'×':>7}{'RSS MiB':>9}{'over idle':>11}{'rows':>8}")
    for r in report["sizes"]:
        print(f"{r['export_bytes']:>14,}{r['model_visible_chars']:>15,}"
              f"{r['model_visible_tokens']:>8,}"
              f"{r['visible_vs_smallest']:>11}{r['wall_s']:>9}{r['wall_vs_smallest']:>7}"
              f"{r['peak_rss_mib']:>9}{r['rss_over_idle_mib']:>11}{r['rows']:>8,}")
    print(f"spread of model-visible characters across sizes: {report['visible_spread']:.2%}")
    return 0


def run_dispatch(args: argparse.Namespace) -> int:
    from byref.dispatch.bench import dispatch_bench

    report = dispatch_bench()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{'call':16}{'dispatch µs':>13}{'direct µs':>11}{'overhead µs':>13}{'ratio':>9}")
    for name, row in report.items():
        print(f"{name:16}{row['dispatch_us']:>13}{row['direct_us']:>11}"
              f"{row['overhead_us']:>13}{row['ratio']:>9}")
    return 0
