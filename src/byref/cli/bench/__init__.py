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
from byref.cli.progress import progress
from byref.demo.data import parse_size

_PLUGINS = ("byref.cli.bench.store", "byref.cli.bench.search", "byref.cli.bench.gateway",
            "byref.cli.bench.conversations", "byref.cli.bench.run_python",
            "byref.cli.bench.code_mode", "byref.cli.bench.gateway_code")


def register(sub: Any) -> None:
    """Add the `bench` command to the CLI's subparsers."""
    parser = sub.add_parser("bench", help="run a benchmark and print its figures")
    bench = parser.add_subparsers(dest="bench", required=True)
    context = bench.add_parser(
        "context", help="model-visible characters, wall time and peak RSS of the byref round "
        "trip as the export grows")
    context.add_argument("--sizes", default="2MB,20MB,200MB")
    context.add_argument("--open", type=int, default=None, dest="open_items",
                         help="fix the number of open items (default: scale with the size)")
    context.add_argument("--turns", type=int, default=None,
                         help="instead: a scripted session of this many turns under a request "
                         "budget (request bytes, replaced groups, byte-identical prefix share)")
    context.add_argument("--budget", type=int, default=None,
                         help="request budget in bytes for --turns (default 65536)")
    context.add_argument("--json", action="store_true")
    context.set_defaults(run=run_context)
    dispatch = bench.add_parser("dispatch", help="per-call overhead of the dispatch pipeline "
                                "in µs, and as a ratio to the same tool call without byref (its "
                                "result JSON-encoded, as any harness must)")
    dispatch.add_argument("--json", action="store_true")
    dispatch.set_defaults(run=run_dispatch)
    for module in plugins(_PLUGINS):
        module.register_bench(bench)


def run_context(args: argparse.Namespace) -> int:
    """`byref bench context`: model-visible size, time and memory of the demo round trip per
    export size; returns the exit code."""
    if args.turns is not None:
        return run_context_turns(args)
    from byref.bench.library.demo import context_bench

    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError as exc:
        print(f"byref bench context: {exc}", file=sys.stderr)
        return 2
    # Two steps per size (write the export, run the round trip); a bar on a terminal only.
    with progress("bench context", 2 * len(sizes)) as advance:
        report = context_bench(sizes, open_items=args.open_items,
                               progress=lambda _step: advance(1))
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


def context_turns(turns: int, budget: int | None = None) -> dict[str, Any]:
    """Play the context bench's session through the real harness and measure its requests."""
    from byref.bench.library import context as bench
    from byref.harness import Harness, Limits, ScriptedModel, call, say
    from byref.harness.loop import render, request_bytes
    from byref.harness.messages import Request
    from byref.store import MemoryStore, Scope

    limit = budget or bench.BUDGET_BYTES
    store, scope = MemoryStore(), Scope("bench", conversation="context-turns")
    steps = [call(c.tool, c.input) for c in bench.plan(turns, bench.prepare(store, scope))]
    h = Harness(ScriptedModel([*steps, say("Done.")]), bench.bench_tools(), store=store,
                scope=scope, limits=Limits(budget=limit, max_steps=turns))
    h.run_sync("Are my technology funds too concentrated? Read the holdings and the research.")
    raw = request_bytes(Request(h.system, h.requests[-1].tools, tuple(render(h.transcript))))
    return bench.figures(h.requests, h.assembled, budget=limit, raw_bytes=raw)


def run_context_turns(args: argparse.Namespace) -> int:
    """`byref bench context --turns N`: request size and prefix reuse over a long conversation
    under a budget; returns the exit code."""
    if args.turns < 2:
        print(f"byref bench context: --turns must be at least 2, got {args.turns!r}",
              file=sys.stderr)
        return 2
    report = context_turns(args.turns, args.budget)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"budget {report['budget_bytes']:,} bytes; raw transcript "
          f"{report['raw_transcript_bytes']:,} bytes ({report['raw_vs_budget']}× the budget)")
    print(f"{'turn':>5}{'request bytes':>15}{'replaced':>10}{'new':>5}{'identical':>11}")
    for t in report["per_turn"]:
        print(f"{t['turn']:>5}{t['request_bytes']:>15,}{t['replaced_groups']:>10}"
              f"{t['new_replacements']:>5}{t['identical_prefix_share']:>11.1%}")
    print(f"all fit: {report['all_fit']}; turns without a new replacement: "
          f"{report['turns_without_new_replacement']} (prefix held in all: "
          f"{report['prefix_held_when_no_new_replacement']})")
    return 0


def run_dispatch(args: argparse.Namespace) -> int:
    """`byref bench dispatch`: per-call dispatch overhead and digest-read cost; returns the exit
    code."""
    from byref.bench.library.dispatch import digest_read_bench, dispatch_bench
    from byref.bench.library.dispatch_async import async_dispatch_bench

    report = dispatch_bench()
    digest = digest_read_bench()
    paths = async_dispatch_bench()
    if args.json:
        print(json.dumps({**report, "digest_read": digest, "async_paths": paths}, indent=2))
        return 0
    print(f"{'call':15}{'the tool':24}{'dispatch µs':>12}{'without byref µs':>18}"
          f"{'overhead µs':>13}{'ratio':>7}{'chars shown (without)':>24}")
    for name, row in report.items():
        shown = f"{row['chars_shown']:,} ({row['direct_chars']:,})"
        print(f"{name:15}{row['work']:24}{row['dispatch_us']:>12}{row['direct_us']:>18}"
              f"{row['overhead_us']:>13}{row['ratio']:>7}{shown:>24}")
    print("without byref: the same function, its data inline, its result json.dumps-encoded "
          "(what a harness must do before the model sees it); same run, interleaved")
    print(f"query_json over {digest['bytes'] / 1e6:.1f} MB stored: {digest['plain_mb_s']} MB/s "
          f"unverified, {digest['verified_mb_s']} MB/s digest-verified "
          f"(×{digest['ratio']} of the unverified throughput)")
    print(f"\n{'path (async vs sync)':42}{'µs/call':>9}{'vs sync µs':>12}")
    for name, row in paths.items():
        print(f"{name:42}{row['us']:>9}{row['vs_sync_us']:>+12}")
    print("best of interleaved repeats; the session rows include recording the tool message "
          "(adispatch records none: compare it with the baseline less the append)")
    return 0
