"""`byref demo`: the status-report round trip, through byref and through a naive harness."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from byref.cli.progress import progress
from byref.demo.data import parse_size

ANNOUNCED_FROM = 20_000_000
"""Export size from which a piped run names each stage on stderr as it starts (the default
2.1 MB run takes a second or two and stays quiet in pipes; 200 MB takes about a minute)."""


def register(sub: Any) -> None:
    """Add the `demo` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "demo", help="filter a JSON export to its open items and make a PDF, by reference",
        description="Run the status-report scenario offline with a scripted model and print the "
        "ledger: what the model read and wrote through byref, against a naive harness.",
    )
    parser.add_argument("--size", default="2.1MB", help="export size: 2.1MB (default), 20MB, "
                        "200MB, 2GB")
    parser.add_argument("--out", default="byref-demo", type=Path,
                        help="directory for the export, PDF, transcript and store")
    parser.add_argument("--json", action="store_true", help="print the ledger as JSON")
    parser.add_argument("--model", default=None, metavar="PROVIDER:MODEL",
                        help="run the byref side against a real model, e.g. "
                        "anthropic:claude-sonnet-4-5 or openai:gpt-6.1-sol (needs "
                        "ANTHROPIC_API_KEY or OPENAI_API_KEY); the scripted model is the default")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref demo`: run the status-report scenario offline and print its ledger; returns the
    exit code."""
    from byref.demo.scenario import run_demo

    try:
        size = parse_size(args.size)
    except ValueError as exc:
        print(f"byref demo: {exc}", file=sys.stderr)
        return 2
    model = None
    if args.model is not None:
        from byref.harness.providers import ProviderSetupError, model_from_id

        try:
            model = model_from_id(args.model)
        except (ValueError, ProviderSetupError) as exc:
            print(f"byref demo: {exc} Without --model the demo runs offline with the scripted "
                  "model.", file=sys.stderr)
            return 2
    loud = not sys.stderr.isatty() and size >= ANNOUNCED_FROM
    started = time.monotonic()
    with ExitStack() as stack:

        def bar(label: str, total: int) -> Callable[[float], None]:
            # One stage at a time: the previous stage's bar closes as the next one opens.
            stack.close()
            if loud:  # piped, and long enough that silence would read as a hang
                print(f"byref demo: {label} ({time.monotonic() - started:.0f} s so far)",
                      file=sys.stderr, flush=True)
            advance = stack.enter_context(progress(label, total))
            done = [0.0]

            def update(value: float) -> None:
                advance(value - done[0])
                done[0] = value

            return update

        try:
            result = run_demo(args.out, size, progress=bar, model=model)
        except RuntimeError as exc:
            # ProviderError, StepLimitError: a real model's run can fail; say why, no traceback.
            if model is None:
                raise
            print(f"byref demo: the run with {args.model!r} failed: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(result.report, indent=2))
    else:
        print("\n".join(_table(result.report)))
    return 0


def _table(r: dict[str, Any]) -> Iterator[str]:
    b, n = r["byref"], r["naive"]
    naive_note = "" if n["run"] else "  (computed from sizes; too large to run)"
    yield f"Status report over a {r['export_bytes']:,}-byte export of {r['export_items']:,} items"
    if r.get("model", "scripted") != "scripted":
        yield f"byref side run by {r['model']}; the naive side is the scripted baseline"
    yield ""
    yield f"{'':24}{'byref':>14}{'naive':>16}"
    for label, key in (("model read (chars)", "model_read_chars"),
                       ("model read (tokens)", "model_read_tokens"),
                       ("model wrote (chars)", "model_written_chars"),
                       ("model wrote (tokens)", "model_written_tokens"),
                       ("peak request (chars)", "peak_request_chars")):
        yield f"{label:24}{b[key]:>14,}{n[key]:>16,}"
    yield f"{'rows to generate_pdf':24}{b['rows_delivered']:>14,}{n['rows_delivered']:>16,}"
    yield f"{'rows byte-identical':24}{b['rows_identical']!s:>14}" + (
        f"{n.get('rows_identical', '-')!s:>16}"
    )
    yield ""
    yield (f"naive/byref: {r['ratio_read']:,}x read, {r['ratio_written']:,}x written"
           f"{naive_note}; {r['rows_expected']} open rows expected")
    usage = b.get("provider_usage")
    if usage:
        yield (f"provider billed: {usage['input_tokens']:,} input tokens "
               f"({usage['cache_read_tokens']:,} from cache), {usage['output_tokens']:,} output, "
               f"over {usage['turns']} turns")
    yield f"PDF: {r['pdf']}"
