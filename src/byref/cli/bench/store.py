"""`byref bench store [--json]`: the store benchmark, registered into the bench command group.

The bench group (`byref.cli.bench`) calls `register_bench(bench_subparsers)`. By default it runs
memory, file and SQLite in a temporary directory, plus PostgreSQL at BYREF_BENCH_POSTGRES_URL and
an S3 API at BYREF_BENCH_S3_URL when those are set; `--url NAME=URL` picks adapters explicitly.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import msgspec


def register_bench(bench_subparsers: Any) -> None:
    """Add `byref bench store` to the bench subcommands."""
    parser = bench_subparsers.add_parser("store", help="artifact store throughput and memory")
    parser.add_argument("--url", action="append", default=[], metavar="NAME=URL",
                        help="an adapter to measure (repeatable); default: memory, file, sqlite")
    parser.add_argument("--stream-mb", type=int, default=1024,
                        help="size of the streamed put/get whose peak RSS is measured")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(run=run)


def _extra() -> dict[str, str]:
    return {name: os.environ[var] for name, var in (
        ("postgres", "BYREF_BENCH_POSTGRES_URL"), ("s3", "BYREF_BENCH_S3_URL"))
        if os.environ.get(var)}


def _urls(args: argparse.Namespace) -> dict[str, str] | None:
    if not args.url:
        return None
    out = {}
    for item in args.url:
        name, sep, url = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --url expects NAME=URL, got {item!r}")
        out[name] = url
    return out


def run(args: argparse.Namespace) -> int:
    """`byref bench store`: throughput and streamed-put memory of each store adapter; returns the
    exit code."""
    from byref.bench.library.store import bench_store

    def log(line: str) -> None:
        if sys.stderr.isatty():
            print(f"… {line}", file=sys.stderr)

    report = bench_store(_urls(args), extra=_extra(), stream_bytes=args.stream_mb << 20, log=log)
    if args.json:
        print(msgspec.json.encode(report).decode())
    else:
        print(format_bench(report))
    return 1 if any("error" in a for a in report["adapters"].values()) else 0


def format_bench(report: dict[str, Any]) -> str:
    """The store bench report as a text table, with ratios against the baseline."""
    lines = [f"{'adapter':9} {'size':6} {'put µs':>9} {'get µs':>9}  {'put MB/s (×base)':>19} "
             f"{'get MB/s (×base)':>19} {'put ops/s':>10}"]
    for label, base in report["baseline"].items():
        lines.append(f"{'baseline':9} {label:6} {'':>9} {'':>9}  {base['put_mb_s']:>10}"
                     f"{'':9} {base['get_mb_s']:>10}")
    for name, entry in report["adapters"].items():
        if "error" in entry:
            lines.append(f"{name:9} error: {entry['error']}")
            continue
        versus = entry.get("latency_vs", {})
        for label, f in entry["throughput"].items():
            head = f"{name:9} {label:6} {f['put_us']:>9} {f['get_us']:>9}  "
            if f.get("by_reference"):
                ratio = versus.get("sizes", {}).get(label)
                than = (f"; µs ×{ratio['put']} put, ×{ratio['get']} get of {versus['adapter']}'s"
                        if ratio else "")
                lines.append(f"{head}hands over a reference, no bytes move{than}")
                continue
            lines.append(f"{head}{f['put_mb_s']:>10} ({f['put_vs_baseline']:>6}) "
                         f"{f['get_mb_s']:>10} ({f['get_vs_baseline']:>6}) {f['put_ops_s']:>10}")
        s = entry["streamed"]
        lines.append(f"{name:9} stream {report['stream_bytes'] >> 20} MB: " + (
            s["skipped"] if "skipped" in s else
            f"peak RSS {s['rss_peak_mb']} MB (+{s['rss_growth_mb']} MB), "
            f"put {s['put_mb_s']} MB/s, get {s['get_mb_s']} MB/s"))
        d = entry.get("stream_digest")
        if d is not None:
            lines.append(f"{name:9} get_stream {d['bytes'] >> 20} MB: " + (
                d["skipped"] if "skipped" in d else
                f"plain {d['plain_mb_s']} MB/s, digest-verified {d['verified_mb_s']} MB/s "
                f"(×{d['verified_vs_plain']})"))
        sp = entry.get("space")
        if sp is not None and "skipped" not in sp:
            held, given = sp["held"], sp["given"]
            lines.append(
                f"{name:9} space after {sp['puts']} puts, {sp['deleted']} deletes: free pages "
                f"{held['free_pages']:,} → {given['free_pages']:,}, file {held['file_mb']} MB → "
                f"{given['file_mb']} MB, workload {held['seconds']} s → {given['seconds']} s "
                f"(×{sp['time_vs_held']})")
    return "\n".join(lines)
