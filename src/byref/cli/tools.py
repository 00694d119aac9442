"""`byref tools search|stats|usage`: the discovery engine over a tools/list catalog.

CATALOG is a tools/list JSON file (a list of tools, or an object with `tools` and an optional
`server`) or a directory of them. With `--json`, a search prints `{"query", "results": [{"server",
"tool", "name", "score", "excerpt"}]}`; with `--queries FILE` one such object per line, in input
order, from one process (the index is built once). `--usage FILE` (JSON lines of `{"query",
"tool"}`, as `byref tools usage TRANSCRIPT…` prints them) teaches the catalog a glossary first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from byref.errors import InvalidValue


def register(sub: Any) -> None:
    """Add the `tools` command to the CLI's subparsers."""
    parser = sub.add_parser("tools", help="search a tool catalog; measure its standing surface",
                            description="Tool discovery over an MCP tools/list catalog.")
    tools_sub = parser.add_subparsers(dest="tools_command", required=True)

    search = tools_sub.add_parser(
        "search", help="rank catalog tools for a query",
        description="Rank the tools of CATALOG for QUERY (or each line of --queries).",
    )
    search.add_argument("catalog", type=Path, help="tools/list JSON file or directory of them")
    search.add_argument("query", nargs="?", help="free-text query")
    search.add_argument("--queries", type=Path, help="file: one query per line, or JSON lines "
                        "with a 'query' field")
    search.add_argument("--limit", type=int, default=5, help="results per query (default 5)")
    search.add_argument("--capability", action="append", default=[],
                        help="capability prefix filter (repeatable)")
    search.add_argument("--domain", action="append", default=[], help="domain filter "
                        "(repeatable)")
    search.add_argument("--hybrid", action="store_true",
                        help="fuse with local embeddings (needs byref[embeddings])")
    search.add_argument("--encoder", default=None, metavar="NAME_OR_PATH",
                        help="with --hybrid: the sentence encoder, an installed package or a "
                        "path to an ONNX sentence encoder with its tokenizer")
    search.add_argument("--usage", type=Path, help="JSON lines of {query, tool} to learn a "
                        "glossary from before searching (see `byref tools usage`)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(run=run_search)

    usage = tools_sub.add_parser(
        "usage", help="the (query, tool) evidence in saved transcripts, as JSON lines",
        description="Print one {query, tool} JSON line for every tool activated from a "
        "search_tools page in the given transcripts: the input of `tools search --usage`.",
    )
    usage.add_argument("transcripts", type=Path, nargs="+", help="transcript JSON-lines files")
    usage.set_defaults(run=run_usage)

    stats = tools_sub.add_parser(
        "stats", help="tool count and standing tool-surface characters",
        description="Characters of the capability line + scaffolding (turn 1), of a full "
        "working set, and of every schema declared.",
    )
    stats.add_argument("catalog", type=Path, help="tools/list JSON file or directory of them")
    stats.add_argument("--budget", type=int, default=8, help="working-set slots (default 8)")
    stats.add_argument("--json", action="store_true", help="print JSON")
    stats.set_defaults(run=run_stats)


def _queries(path: Path) -> Iterator[str]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidValue(f"{str(path)!r} line {number} is not JSON: {exc}") from exc
            if not isinstance(raw, dict) or not isinstance(raw.get("query"), str):
                raise InvalidValue(f"{str(path)!r} line {number} has no 'query' string.")
            yield raw["query"]
        else:
            yield line.strip()


def run_search(args: argparse.Namespace) -> int:
    """`byref tools search`: rank a catalog's tools for a query or a file of queries; returns the
    exit code."""
    from byref.discovery import FilterError, Filters, ListingError, Searcher, load_catalog
    from byref.discovery.declaring.usage import learn_glossary, read_usage

    if (args.query is None) == (args.queries is None):
        print("byref tools search: give a QUERY or --queries FILE (exactly one).",
              file=sys.stderr)
        return 2
    try:
        catalog = load_catalog(args.catalog)
        queries = [args.query] if args.query is not None else list(_queries(args.queries))
        if args.usage is not None:
            unknown = catalog.learn(learn_glossary(read_usage(args.usage)))
            if unknown:
                print(f"byref tools search: usage names {len(unknown)} tool(s) not in the "
                      f"catalog, ignored: {', '.join(map(repr, sorted(unknown)[:10]))}",
                      file=sys.stderr)
    except (ListingError, ValueError, OSError) as exc:
        print(f"byref tools search: {exc}", file=sys.stderr)
        return 2
    ranker = None
    if args.hybrid:
        from byref.discovery.hybrid.encoder import ModelError

        try:
            from byref.discovery.hybrid.embed import HybridRanker

            ranker = HybridRanker(args.encoder)
            _ = ranker.encoder
        except (ImportError, ModelError) as exc:
            print(f"byref tools search: {exc}", file=sys.stderr)
            return 2
    searcher = Searcher(catalog, ranker=ranker)
    filters = Filters(capabilities=tuple(args.capability), domains=tuple(args.domain))
    for query in queries:
        try:
            page = searcher.search(query, filters=filters, limit=args.limit)
        except FilterError as exc:
            print(f"byref tools search: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(page.to_json(), ensure_ascii=False))
            continue
        print(f"{query}  ({page.matched} of {page.candidates} tools match)")
        for i, r in enumerate(page.results, 1):
            where = f" [{r.server}]" if r.server else ""
            print(f"  {i}. {r.name}{where}  {r.score:.3f}")
            print(f"     {r.excerpt}")
        if page.abstained:
            from byref.discovery.declaring.scaffold import no_fit_text

            print(f"  {no_fit_text(page.unmatched, catalog.capability_roots())}")
        elif page.unmatched:
            print(f"  (no tool mentions {', '.join(map(repr, page.unmatched))})")
    return 0


def run_usage(args: argparse.Namespace) -> int:
    """`byref tools usage`: the tool usage recorded in transcripts; returns the exit code."""
    from byref.discovery.declaring.usage import usage_from_transcript
    from byref.transcript import Transcript, TranscriptCorruptError

    for path in args.transcripts:
        if not path.is_file():
            print(f"byref tools usage: no transcript file at {str(path)!r}.", file=sys.stderr)
            return 2
        try:
            with Transcript(path) as transcript:
                found = usage_from_transcript(transcript)
        except (TranscriptCorruptError, OSError) as exc:
            print(f"byref tools usage: {exc}", file=sys.stderr)
            return 2
        for u in found:
            print(json.dumps(u.to_json(), ensure_ascii=False))
    return 0


def run_stats(args: argparse.Namespace) -> int:
    """`byref tools stats`: a catalog's standing tool surface; returns the exit code."""
    from byref.bench.search.discovery import surface
    from byref.discovery import ListingError, load_catalog

    try:
        catalog = load_catalog(args.catalog)
    except (ListingError, OSError) as exc:
        print(f"byref tools stats: {exc}", file=sys.stderr)
        return 2
    figures = surface(catalog, budget=args.budget)
    figures["budget"] = args.budget
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"{figures['tools']:,} tools, {figures['capability_roots']} capability roots")
    print(f"turn 1 (capability line + scaffolding):  {figures['turn1_chars']:>12,} chars")
    print(f"full working set ({args.budget} median tools):    "
          f"{figures['working_set_chars']:>12,} chars")
    print(f"full working set ({args.budget} largest tools):   "
          f"{figures['working_set_largest_chars']:>12,} chars")
    print(f"every schema declared:                   {figures['all_declared_chars']:>12,} chars")
    return 0
