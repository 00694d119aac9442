"""`byref bench gateway [--quick] [--calls N] [--session N] [--no-surface | --surface-only]
[--json]`: what the
gateway costs per call, each figure a ratio to a direct call to the same upstream, and the
first-turn tool surface with and without it.

Registered by the `bench` command group. The per-call figures need only the `mcp` SDK (the
upstream ships with byref); the first-turn surface needs the reference servers `make test`
installs (mcp-server-time, mcp-server-git, mcp-server-sqlite in .venv-sqlite, the npm filesystem
server); those missing are named in the output and left out of both sides of that comparison.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from byref.errors import install_hint


def register_bench(bench_sub: Any) -> None:
    """Add `byref bench gateway` and its options to the `bench` subparsers."""
    parser = bench_sub.add_parser(
        "gateway", help="per-call cost of byref gateway as a ratio to a direct call (stdio, "
        "HTTP, a long session, large results), and the first-turn tool surface")
    parser.add_argument("--quick", action="store_true",
                        help="a few calls of each kind and small results: a smoke run in seconds")
    parser.add_argument("--calls", type=int, default=None,
                        help="timed calls per side in the stdio and HTTP figures")
    parser.add_argument("--session", type=int, default=None,
                        help="calls in the long session (its first and last fifth are compared)")
    parser.add_argument("--no-surface", action="store_true",
                        help="skip the first-turn surface (which starts the reference servers)")
    parser.add_argument("--surface-only", action="store_true",
                        help="only the first-turn surface (reference servers, real catalog)")
    parser.add_argument("--replicas", type=int, default=None, metavar="N",
                        help="instead: N gateways behind HAProxy on shared PostgreSQL state "
                        "against one (throughput, p50/p95), and RSS over large results")
    parser.add_argument("--rss-calls", type=int, default=5_000,
                        help="--replicas: calls with large results before RSS is read again")
    parser.add_argument("--rss-mb", type=int, default=10,
                        help="--replicas: size of each large result in MB")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the gateway benchmark the arguments ask for and print its report; the exit status (2
    when the `mcp` extra is missing or an argument is out of range)."""
    if args.replicas is not None:
        return run_replicas(args)
    try:
        from byref.bench.gateway.calls import FULL, QUICK
        from byref.bench.gateway.run import gateway_bench
    except ModuleNotFoundError as exc:
        print(f"byref bench gateway: {exc.name!r} is not installed; run: "
              f"{install_hint('mcp')}", file=sys.stderr)
        return 2
    from byref.cli.progress import progress

    plan = QUICK if args.quick else FULL
    for flag in ("calls", "session"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            print(f"byref bench gateway: --{flag} must be at least 1, got {value!r}",
                  file=sys.stderr)
            return 2
    if args.calls is not None:
        plan = dataclasses.replace(plan, calls=args.calls)
    if args.session is not None:
        plan = dataclasses.replace(plan, session=args.session,
                                   window=min(plan.window, max(1, args.session // 5)))
    if args.surface_only and args.no_surface:
        print("byref bench gateway: --surface-only and --no-surface exclude each other",
              file=sys.stderr)
        return 2
    with progress("bench gateway", 0 if args.surface_only else plan.steps()) as advance:
        report = gateway_bench(plan, advance, surface=not args.no_surface,
                               calls=not args.surface_only)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(format_report(report)))
    return 0


def _pair(r: dict[str, Any]) -> str:
    p95 = (f"; p95 {r['gateway_p95_ms']} vs {r['direct_p95_ms']} ms (×{r['ratio_p95']})"
           if "ratio_p95" in r else "")
    return (f"p50 {r['gateway_p50_ms']} ms vs direct {r['direct_p50_ms']} ms "
            f"(×{r['ratio_p50']}){p95}")


def format_report(report: dict[str, Any]) -> list[str]:
    """The report as text: each gateway figure beside the direct call it is compared with."""
    return (_calls(report) if "stdio" in report else []) + _surface(report)


def _calls(report: dict[str, Any]) -> list[str]:
    out = [f"upstream: {report['upstream']}; every ratio is gateway ÷ direct, same run, "
           "interleaved"]
    s = report["stdio"]
    out += [f"stdio, {s['calls']} calls:",
            f"  activated tool by name   {_pair(s['activated'])}",
            f"  through call_tool        {_pair(s['call_tool'])}"]
    if "sdk_floor" in report:
        f = report["sdk_floor"]
        out += [f"the SDK floor (stdio, {f['calls']} calls; the mcp SDK's own server and client "
                "in front of the upstream, no byref code):",
                f"  gateway, activated tool  {_pair(f['activated'])}",
                f"  SDK floor proxy          {_pair(f['sdk_floor'])}",
                f"  gateway ÷ SDK floor      ×{f['activated_vs_sdk_floor_p50']}"]
    h = report["http"]
    out += [f"HTTP, {h['calls']} calls (upstream on {h['upstream_behind_gateway']} behind the "
            f"gateway; both servers on {h['event_loop']}):",
            f"  call_tool                {_pair(h['call_tool'])}",
            f"  tools/list               {_pair(h['tools_list'])}",
            f"  search_tools vs a call   {_pair(h['search_tools_vs_direct_call'])}"]
    k = report.get("tasks")
    if k:
        out += [f"MCP tasks (HTTP, {k['calls']} calls; tasks begin after 0.2 s):",
                f"  call_tool                {_pair(k['call_tool'])}",
                f"  …declaring the extension {_pair(k['call_tool_declaring_tasks'])}",
                f"  tasks/get of a running task {_pair(k['tasks_get_poll'])}"]
    n = report["session"]
    rss = n["rss"]
    out += [f"one session of {n['calls']:,} calls through call_tool (stdio):",
            f"  first {n['window']:,}  {_pair(n['first'])}",
            f"  last {n['window']:,}   {_pair(n['last'])}",
            f"  gateway p50 last ÷ first ×{n['gateway_last_vs_first_p50']}; RSS per call: "
            f"gateway {rss['gateway_kib_per_call']} KiB ({rss['gateway_start_mib']} → "
            f"{rss['gateway_end_mib']} MiB), direct upstream {rss['direct_kib_per_call']} KiB"]
    r = report["results"]
    out.append("large results through call_tool (stdio), median of "
               f"{r['plain']['rounds']} rounds:")
    for label in ("plain", "log", "log_x4"):
        c = r[label]
        out.append(f"  {c['chars']:>9,} chars {c['shape']:5}  {_pair(c)}; chars shown "
                   f"{c['gateway_chars_shown']:,} vs {c['direct_chars_shown']:,}")
    x4 = r["log_x4_vs_log"]
    out.append(f"  log ×4 the size costs ×{x4['gateway']} through the gateway, ×{x4['direct']} "
               "direct")
    d = report.get("direct_mode")
    if d:
        out += [f"byref.mode \"direct\" (stdio, {d['calls']} calls, {d['declared']} tools "
                "declared, no activation):",
                f"  direct mode, by name     {_pair(d['direct_mode'])}",
                f"  search mode, activated   {_pair(d['search_mode'])}",
                f"  direct mode ÷ search mode p50 ×{d['direct_mode_vs_search_mode_p50']}"]
    pool = report.get("pool")
    if pool:
        out += [f"upstream pool (HTTP, {pool['calls']} calls alternating; \"share\": \"principal\" "
                "vs \"all\"):",
                f"  pooled p50 {pool['pooled_p50_ms']} ms vs shared {pool['shared_p50_ms']} ms "
                f"(×{pool['pooled_vs_shared_p50']})",
                f"  first call: shared {pool['first_call_ms']['shared']} ms, pooled "
                f"{pool['first_call_ms']['pooled']} ms; a second principal's first call (starts "
                f"its own process) {pool['second_principal_first_call_ms']} ms = "
                f"×{pool['second_principal_vs_warm']} a warm call",
                f"  with \"prestart\": \"connect\" (its process started when it connected): "
                f"a second principal's first call {pool['prestart_second_principal_first_call_ms']}"
                f" ms = ×{pool['prestart_second_principal_vs_without']} without prestart; the "
                f"first principal's {pool['prestart_first_call_ms']} ms"]
    trip = report.get("round_trip")
    if trip:
        out.append(f"one search → activate → call round trip of {trip['tool']} (model-visible "
                   "characters: tool list + calls and results, summed over its 4 requests):")
        for key, label in (("handshake", "handshake era (list grows)"),
                           ("2026-07-28", "2026-07-28 (list fixed)")):
            g = trip[key]
            out.append(f"  {label:27} {g['round_trip_chars']:>7,} chars; last request "
                       f"{g['last_request_chars']:,}; tool list grew "
                       f"{g['declarations_growth_chars']:,}")
        out.append(f"  2026-07-28 ÷ handshake    ×{trip['ratio_round_trip']} round trip, "
                   f"×{trip['ratio_last_request']} last request")
    return out


def _surface(report: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, mode in (("first_turn", "search"), ("first_turn_direct", "direct")):
        turn = report.get(key)
        if turn:
            out.append(f"first turn ({mode} mode): {turn['direct_tools']} tools declared "
                       f"directly = {turn['direct_tokens']:,} tokens ({turn['direct_chars']:,} "
                       f"chars); through the gateway {turn['gateway_tools']} tools + "
                       f"instructions = {turn['gateway_tokens']:,} tokens "
                       f"({turn['gateway_chars']:,} chars); ratio {turn['ratio_tokens']}")
    cat = report.get("first_turn_catalog")
    if cat:
        out.append(f"first turn over the real catalog's {cat['servers']} servers: their own "
                   f"declarations of {cat['tools']:,} tools = {cat['direct_tokens']:,} tokens")
        for mode in ("search", "direct"):
            m = cat[mode]
            out.append(f"  {mode} mode: {m['tools']:,} tools + instructions = "
                       f"{m['tokens']:,} tokens ({m['chars']:,} chars); ratio {m['ratio_tokens']}")
    if "missing_catalog" in report:
        out.append(f"missing the real catalog: {report['missing_catalog']}")
    for name, why in report.get("missing", {}).items():
        out.append(f"missing {name}: {why}")
    return out


def run_replicas(args: argparse.Namespace) -> int:
    """Run `--replicas N` (N gateways behind HAProxy against one) and print its report; the exit
    status (2 when N < 2 or the rig cannot start)."""
    from byref.bench.gateway.replicas import format_replicas, replicas_bench

    if args.replicas < 2:
        print(f"byref bench gateway: --replicas must be at least 2, got {args.replicas!r}",
              file=sys.stderr)
        return 2

    def log(line: str) -> None:
        if sys.stderr.isatty():
            print(f"… {line}", file=sys.stderr)

    quick = {"sessions": 4, "calls": 10, "rounds": 2} if args.quick else {}
    try:
        report = replicas_bench(args.replicas, rss_calls=args.rss_calls, rss_mb=args.rss_mb,
                                log=log, **quick)
    except RuntimeError as exc:
        print(f"byref bench gateway: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report) if args.json else format_replicas(report))
    return 0
