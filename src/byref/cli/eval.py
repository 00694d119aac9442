"""`byref eval`: task suites × arms × a model; prints a table, writes JSON and an HTML page."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from byref.cli.progress import progress
from byref.demo.data import parse_size

META = "eval-run.json"
"""What a recording was run with, so `--replay DIR` runs the same tasks."""


def register(sub: Any) -> None:
    """Add the `eval` command to the CLI's subparsers."""
    parser = sub.add_parser(
        "eval", help="run task suites in each arm (inline, refs, code; direct, search) "
        "against a model and score them",
        description="Run byref's task suites (nestful, corpus, status, selection) in each arm "
        "against a model (the scripted oracle by default), score each run on the state the "
        "tools were left in, print a table, and write eval.json and eval.html.")
    parser.add_argument("--model", default="oracle", metavar="PROVIDER:MODEL",
                        help="'oracle' (scripted, the default), or e.g. "
                        "openai-chat:gemma-3-270m with --base-url, anthropic:…, openai:…")
    parser.add_argument("--base-url", default=None,
                        help="an OpenAI-compatible server for openai-chat: models")
    parser.add_argument("--max-output-tokens", type=int, default=None)
    parser.add_argument("--request-extra", default=None, metavar="JSON",
                        help="fields added to every request, e.g. '{\"tool_choice\": "
                        "\"auto\"}' for a server that calls no tool without it")
    parser.add_argument("--suites", default="nestful,corpus,status,selection")
    parser.add_argument("--arms", default=None,
                        help="only these arms (default: every arm a suite has)")
    parser.add_argument("--limit", type=int, default=None,
                        help="the first N tasks of each suite (a slice)")
    parser.add_argument("--sizes", default="50,500,5000", help="corpus sizes in records")
    parser.add_argument("--export-size", default="2.1MB", help="the status report's export")
    parser.add_argument("--catalog", type=Path, default=None,
                        help="a directory of MCP tools/list JSON files for the selection "
                        "suite (default: shared/eval/mcp-catalog beside the repository)")
    parser.add_argument("--declared", type=int, default=40,
                        help="tools the selection suite's direct arm declares")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=12)
    recording = parser.add_mutually_exclusive_group()
    recording.add_argument("--record", type=Path, default=None, metavar="DIR",
                           help="keep every model turn under DIR")
    recording.add_argument("--replay", type=Path, default=None, metavar="DIR",
                           help="play back the turns --record kept (no model needed)")
    parser.add_argument("--out", type=Path, default=Path("byref-eval"),
                        help="where eval.json and eval.html go")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=run)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"model": args.model, "suites": args.suites, "arms": args.arms, "limit": args.limit,
            "sizes": args.sizes, "export_size": args.export_size, "seed": args.seed,
            "declared": args.declared,
            "max_steps": args.max_steps}


def run(args: argparse.Namespace) -> int:
    """`byref eval`: returns the exit code."""
    from byref.eval.report import build, page, table, timing_line
    from byref.eval.runner import Options, run_eval
    from byref.eval.suites import Plan, load

    settings = _settings(args)
    if args.replay is not None:
        meta = args.replay / META
        if not meta.is_file():
            print(f"byref eval: {str(args.replay)!r} holds no {META}: replay a directory "
                  "that `byref eval --record` wrote.", file=sys.stderr)
            return 2
        settings = json.loads(meta.read_text())
    plan = Plan(suites=tuple(s for s in settings["suites"].split(",") if s),
                limit=settings["limit"],
                sizes=tuple(int(s) for s in settings["sizes"].split(",") if s),
                export_size=parse_size(settings["export_size"]), catalog=args.catalog,
                seed=settings["seed"], declared=settings.get("declared", 40))
    tasks = load(plan)
    options = Options(model=settings["model"], record=args.record, replay=args.replay,
                      max_steps=settings["max_steps"])
    if args.base_url:
        options.model_options["base_url"] = args.base_url
    if args.max_output_tokens is not None:
        options.model_options["max_output_tokens"] = args.max_output_tokens
    if args.request_extra:
        try:
            options.model_options["extra"] = dict(json.loads(args.request_extra))
        except (ValueError, TypeError):
            print(f"byref eval: --request-extra {args.request_extra!r} is not a JSON object.",
                  file=sys.stderr)
            return 2
    if args.record is not None:
        args.record.mkdir(parents=True, exist_ok=True)
        (args.record / META).write_text(json.dumps(settings, indent=2) + "\n")
    arms = settings["arms"].split(",") if settings["arms"] else None
    runs = sum(len([a for a in t.arms if arms is None or a in arms]) for t in tasks)
    with progress("byref eval", runs) as advance:
        result = run_eval(tasks, options, arms=arms, progress=lambda _: advance(1))
    if args.replay is not None:
        result["model"] = settings["model"]
    report = build(result)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eval.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "eval.html").write_text(page(report))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(table(report))
    print(timing_line(report))
    print(f"JSON: {args.out / 'eval.json'}; chart: {args.out / 'eval.html'}")
    return 0
