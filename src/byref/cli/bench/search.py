"""`byref bench search`: tool-discovery figures (registered by the `bench` command group).

Prints MetaTool recall@1/@5/MRR (lexical and, with byref[embeddings], hybrid) beside the
published baselines, search latency and index build time at 2,565 and 10,000 tools, and the
standing tool surface; reads `shared/eval` beside the repository (or `--eval DIR`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register_bench(bench_sub: Any) -> None:
    """Add `byref bench search` to the bench subcommands."""
    parser = bench_sub.add_parser(
        "search", help="tool-discovery benchmarks (MetaTool, latency, standing surface)",
        description="Measure tool discovery: MetaTool retrieval, search latency, index build "
        "time and the standing tool surface on the real MCP catalog.",
    )
    parser.add_argument("--eval", type=Path, default=None,
                        help="evaluation data directory (default: ../shared/eval)")
    parser.add_argument("--no-hybrid", action="store_true", help="skip the embedding runs")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--first-search", action="store_true",
                        help="only the first hybrid search, cold vs warm vector cache")
    parser.add_argument("--lexical", action="store_true",
                        help="only the lexical figures: the first and warm searches in new "
                        "processes against bm25s and tantivy at 2,565 and 10,000 tools, p50 "
                        "against them over several rounds, recall per query set")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds against bm25s and tantivy (--lexical)")
    parser.add_argument("--abstention", action="store_true",
                        help="only the abstention rates (unanswerable and answerable sets)")
    parser.add_argument("--encoder", default=None, metavar="NAME_OR_PATH",
                        help="the hybrid's sentence encoder: an installed package or a path to "
                        "an ONNX sentence encoder with its tokenizer (default: the packaged "
                        "all-MiniLM-L6-v2 int8, or $BYREF_EMBEDDING_MODEL)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """`byref bench search`: tool-discovery retrieval, latency and surface figures; returns the
    exit code, 2 without evaluation data."""
    from byref.bench.search import discovery as bench

    if args.first_search:
        return _first_search(args)
    if args.abstention:
        return _abstention(args)
    if args.lexical:
        return _lexical(args)
    try:
        figures = bench.run(args.eval, hybrid=not args.no_hybrid, encoder=args.encoder)
    except FileNotFoundError as exc:
        print(f"byref bench search: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    meta = figures["metatool"]
    print(f"MetaTool ({meta['queries']:,} queries, {meta['tools']} tools)")
    for label, key in (("lexical", "lexical"),
                       ("lexical, no synonym table", "lexical_without_synonyms"),
                       ("lexical, no re-rank", "lexical_without_rerank"),
                       ("lexical, seed re-rank top 5", "lexical_seed_rerank"),
                       ("lexical, re-rank every match", "lexical_rerank_all"),
                       ("embedding only (ONNX)", "embedding_only"),
                       ("hybrid", "hybrid"),
                       ("lexical, learned glossary", "lexical_learned"),
                       ("lexical, learned, no re-rank", "lexical_learned_without_rerank"),
                       ("hybrid, learned glossary", "hybrid_learned")):
        if key in meta:
            _row(label, meta[key])
    for k, m in meta["lexical_learned_curve"].items():
        _row(f"lexical, learned ≤{k}/tool", m)
    print(f"  (learned from {meta['usage_rows']:,} rows outside the sample; "
          f"{meta['usage_rows_dropped_as_sample_duplicates']} dropped as sample duplicates)")
    for name, m in meta["baselines"].items():
        print(f"  {name:28} r@1 {m['recall@1']:.3f}  r@5 {m['recall@5']:.3f}")
    mcp = figures["mcp"]
    print(f"MCP catalog (reference workload {mcp['reference_ms']} ms)")
    for row in mcp["sizes"]:
        s, surface = row["search"], row["surface"]
        print(f"  {row['tools']:>6,} tools: search p50 {s['p50_ms']} ms, p95 {s['p95_ms']} ms; "
              f"build {row['build_ms']} ms; turn 1 {surface['turn1_chars']:,} chars, working "
              f"set {surface['working_set_chars']:,}, all {surface['all_declared_chars']:,}")
    for row in mcp["sizes"]:
        e = row.get("engines", {})
        if "missing" in e:
            print(f"  engines: {e['missing']}")
        elif e:
            print(f"  {row['tools']:>6,} tools, interleaved, unfiltered: byref search p50 "
                  f"{e['byref_search']['p50_ms']} ms, ranking {e['byref_ranking']['p50_ms']} ms; "
                  f"bm25s {e['bm25s']['p50_ms']} ms (search ×{e['byref_search_over_bm25s_p50']}, "
                  f"ranking ×{e['byref_ranking_over_bm25s_p50']}), its scoring core "
                  f"{e['bm25s_scores']['p50_ms']} ms (×{e['byref_search_over_bm25s_scores_p50']}, "
                  f"×{e['byref_ranking_over_bm25s_scores_p50']}), tantivy "
                  f"{e['tantivy']['p50_ms']} ms (×{e['byref_search_over_tantivy_p50']}, "
                  f"×{e['byref_ranking_over_tantivy_p50']})")
    for row in mcp["sizes"]:
        if "hybrid_search" in row:
            h = row["hybrid_search"]
            print(f"  {row['tools']:>6,} tools, interleaved: hybrid p50 {h['p50_ms']} ms "
                  f"(ratio {h['p50_ratio']}), lexical p50 {h['lexical_p50_ms']} ms, "
                  f"hybrid/lexical {h['hybrid_over_lexical_p50']}; document vectors "
                  f"{h['document_vectors_s']} s")
    if "retrieval" in figures:
        _retrieval(figures["retrieval"], mcp["reference_ms"])
    if "lexical_first" in figures:
        _print_lexical_first(figures["lexical_first"])
    if "first_search" in figures:
        _print_first_search(figures["first_search"])
    if "abstention" in figures:
        _print_abstention(figures["abstention"])
    for note in figures.get("notes", []):
        print(f"note: {note}")
    return 0


def _lexical(args: argparse.Namespace) -> int:
    from byref.bench.search import discovery as bench
    from byref.bench.search.lexical_first import engine_firsts, first_searches
    from byref.bench.search.retrieval import lexical_sets
    from byref.bench.search.search_baselines import baseline_rounds
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    root = args.eval or bench.eval_dir()
    if not (root / "mcp-catalog").is_dir() or not (root / "metatool").is_dir():
        print(f"byref bench search: no metatool/ and mcp-catalog/ under {str(root)!r}",
              file=sys.stderr)
        return 2
    figures: dict[str, Any] = {"engines_first": engine_firsts(root),
                               "first": first_searches(root)}
    catalog = catalog_from_listings(bench.replicate(read_listings(root / "mcp-catalog"),
                                                    10_000))
    figures["engines"] = baseline_rounds(catalog, bench.LATENCY_QUERIES, max(1, args.rounds))
    figures["recall"] = lexical_sets(root)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    _print_engines_first(figures["engines_first"])
    _print_lexical_first(figures["first"])
    _print_rounds(figures["engines"])
    print("Lexical recall per query set: " + "; ".join(
        f"{name} r@1 {m['recall@1']:.3f} r@5 {m['recall@5']:.3f}"
        for name, m in figures["recall"].items()))
    return 0


def _print_engines_first(f: dict[str, Any]) -> None:
    if "missing" in f:
        print(f"engines: {f['missing']}")
        return
    print(f"Lexical search in new processes against bm25s and tantivy in the same process "
          f"(each index built first; the first search is {f['query']!r}, who goes first turns; "
          "medians of the processes):")
    for row in f["sizes"]:
        first, warm = row["first_ms"], row["warm_p50_ms"]
        print(f"  {row['tools']:>6,} tools, {row['runs']} runs (byref build {row['build_ms']} ms): "
              f"first search byref {first['byref']} ms, bm25s {first['bm25s']}, tantivy "
              f"{first['tantivy']} (×{row['first_over_bm25s']} bm25s, ×{row['first_over_tantivy']}"
              f" tantivy); warm p50 byref {warm['byref']} ms, bm25s {warm['bm25s']}, tantivy "
              f"{warm['tantivy']} (×{row['warm_p50_over_bm25s']} bm25s, "
              f"×{row['warm_p50_over_tantivy']} tantivy)")


def _print_lexical_first(f: dict[str, Any]) -> None:
    print(f"First lexical search in a new process ({f['query']!r}; median of the runs, "
          "range, CPU) against the same process's warm p50:")
    for row in f["sizes"]:
        cells = []
        for path in ("library", "gateway"):
            p = row[path]
            cells.append(f"{path} {p['missing']}" if "missing" in p else
                         f"{path} {p['first_ms']} ms ({p['first_min_ms']}–{p['first_max_ms']}; "
                         f"CPU {p['first_cpu_ms']}) vs warm {p['warm_p50_ms']} ms "
                         f"(×{p['first_over_warm']})")
        print(f"  {row['tools']:>6,} tools, {row['runs']} runs: " + "; ".join(cells))


def _print_rounds(e: dict[str, Any]) -> None:
    if "missing" in e:
        print(f"engines: {e['missing']}")
        return
    print(f"Lexical p50 at {e['tools']:,} tools against bm25s and tantivy, "
          f"{len(e['rounds'])} rounds (each interleaved query by query):")
    for i, r in enumerate(e["rounds"], 1):
        print(f"  round {i}: p50 wall (CPU) byref search {r['byref_search']['p50_ms']} "
              f"({r['byref_search']['cpu_p50_ms']}) ms, ranking {r['byref_ranking']['p50_ms']} "
              f"({r['byref_ranking']['cpu_p50_ms']}) ms; bm25s {r['bm25s']['p50_ms']} "
              f"({r['bm25s']['cpu_p50_ms']}) ms, its scoring core {r['bm25s_scores']['p50_ms']} "
              f"ms; tantivy {r['tantivy']['p50_ms']} ms; search ×"
              f"{r['byref_search_over_bm25s_p50']} bm25s (CPU ×"
              f"{r['byref_search_over_bm25s_cpu_p50']}), ×{r['byref_search_over_tantivy_p50']} "
              "tantivy")
    for key, s in e["ratios"].items():
        mine, other = key.removesuffix("_p50").split("_over_")
        print(f"  {mine} / {other.replace('_cpu', ' (CPU)')}: median ×{s['median']} "
              f"(×{s['min']}–×{s['max']})")


def _abstention(args: argparse.Namespace) -> int:
    from byref.bench.search import abstention
    from byref.bench.search import discovery as bench

    root = args.eval or bench.eval_dir()
    if not (root / "mcp-catalog").is_dir() or not (root / "metatool").is_dir():
        print(f"byref bench search: no metatool/ and mcp-catalog/ under {str(root)!r}",
              file=sys.stderr)
        return 2
    figures = {"lexical": abstention.run(root, None)}
    if not args.no_hybrid:
        from byref.discovery.hybrid.embed import HybridRanker

        figures["hybrid"] = abstention.run(root, HybridRanker(args.encoder))
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    _print_abstention(figures)
    return 0


def _first_search(args: argparse.Namespace) -> int:
    from byref.bench.search import discovery as bench
    from byref.bench.search.retrieval import first_search

    root = args.eval or bench.eval_dir()
    if not (root / "mcp-catalog").is_dir():
        print(f"byref bench search: no mcp-catalog/ under {str(root)!r}", file=sys.stderr)
        return 2
    try:
        f = first_search(root, encoder=args.encoder)
    except ImportError as exc:
        print(f"byref bench search: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(f, indent=2))
        return 0
    _print_first_search(f)
    return 0


def _print_first_search(f: dict[str, Any]) -> None:
    print(f"First hybrid search, {f['tools']:,} tools ({f['query']!r}), fresh encoder each: "
          f"cold cache {f['cold_s']} s ({f['cold_encoded']:,} texts encoded), warm cache "
          f"{f['warm_s']} s ({f['warm_encoded']:,} encoded); cold/warm {f['cold_over_warm']}; "
          f"cache file {f['cache_mb']} MB; same results {f['same_results']}")
    print(f"  restarted gateway (background mode, prepared): first search "
          f"{f['restarted_first_s']} s ({f['restarted_encoded']} encoded) vs warm p50 "
          f"{f['warm_p50_s']} s: ×{f['restarted_over_warm_p50']}; first-ever start in "
          f"background mode "
          f"{f['first_ever_background_s']} s (answered lexically: {f['first_ever_lexical']})")
    lex = f["lexical_first_100"]
    print(f"  first lexical search at 100 tools {lex['first_ms']} ms, second {lex['second_ms']} ms")


def _print_abstention(a: dict[str, Any]) -> None:
    for ranking, sets in a.items():
        un = "; ".join(f"{k.split('_', 1)[1]} {v['held_apart']:.0%} held apart "
                       f"({v['tuning']:.0%} tuning, {v['queries']} needs)"
                       if not k.startswith("unanswerable_fresh") else
                       f"{k.split('_', 1)[1]} {v['held_apart']:.0%} ({v['queries']} needs "
                       "written after the rule)"
                       for k, v in sets.items() if k.startswith("unanswerable"))
        ans = "; ".join(f"{k} {v['held_apart']:.1%} held apart, {v['abstained']:.1%} of all "
                        f"{v['queries']} (r@5 {v['recall@5']:.3f} vs "
                        f"{v['recall@5_without']:.3f} without)"
                        for k, v in sets.items() if not k.startswith("unanswerable"))
        print(f"Abstention, {ranking}: unanswerable abstained {un}; answerable abstained {ans}")


def _row(label: str, m: dict[str, float]) -> None:
    print(f"  {label:28} r@1 {m['recall@1']:.3f}  r@5 {m['recall@5']:.3f}  MRR {m['mrr']:.3f}")


def _cells(by_split: dict[str, dict[str, float]]) -> str:
    return "  ".join(f"{name} r@1 {m['recall@1']:.3f} r@5 {m['recall@5']:.3f}"
                     for name, m in by_split.items())


def _retrieval(r: dict[str, Any], reference_ms: float) -> None:
    splits = ", ".join(f"{k} {v:,}" for k, v in r["dev_rows"].items())
    fusion = r["fusion"]
    print(f"Fusion weight (lexical share), dev splits ({splits} rows outside the sample):")
    for weight, by_split in fusion["by_weight"].items():
        cells = "  ".join(f"{name} r@1 {m['recall@1']:.3f} r@5 {m['recall@5']:.3f}"
                          for name, m in by_split.items())
        mark = "  <- chosen on " + fusion["chosen_on"] if float(weight) == fusion["chosen"] else ""
        print(f"  {weight:>4}  {cells}{mark}")
    print("Re-rank (the coverage-then-rarity keys), dev splits:")
    for mode, by_split in r["rerank"].items():
        cells = "  ".join(f"{name} r@1 {m['recall@1']:.3f} r@5 {m['recall@5']:.3f}"
                          for name, m in by_split.items())
        print(f"  {mode:14} {cells}")
    if "near_words" in r:
        print("Near words (the packaged model's nearest words), lexical: MetaTool splits, the "
              "real catalog's task and vocabulary queries:")
        for label, by_split in r["near_words"].items():
            print(f"  {label:10}  {_cells(by_split)}")
    for key, title in (("density", "Neighbourhood-density prior (off by default)"),
                       ("description_share", "Description share of a document vector"),
                       ("name_share", "Name share of a document vector")):
        if key not in r:
            continue
        print(f"{title}, hybrid: MetaTool splits, the real catalog's task and vocabulary "
              "queries:")
        for weight, by_split in r[key].items():
            print(f"  {weight:>4}  {_cells(by_split)}")
    e = r["encode_1_thread"]
    print(f"Query encode, ONNX int8, 1 thread: p50 {e['p50_ms']} ms, p95 {e['p95_ms']} ms "
          f"(ratio {round(e['p50_ms'] / reference_ms, 3)})")
    if "torch" in r:
        t = r["torch"]
        _row("PyTorch MiniLM, embedding", t["embedding_only"])
        _row("PyTorch MiniLM, hybrid", t["hybrid"])
        print(f"  PyTorch encode, 1 thread: p50 {t['encode_1_thread']['p50_ms']} ms")
    for name, title in (("task_queries", "Task-style queries (held out)"),
                        ("vocabulary_queries", "Vocabulary dev queries")):
        t = r[name]
        print(f"{title} on the real catalog ({t['queries']}, hand-written):")
        for key in ("lexical", "lexical_without_synonyms", "lexical_without_near_words",
                    "hybrid", "lexical_also", "hybrid_also"):
            if key in t:
                m = t[key]
                print(f"  {key:28} r@1 {m['recall@1']:.3f}  r@5 {m['recall@5']:.3f}")
    i = r["install"]
    print(f"byref[embeddings] installed here: {i['extra_mb']} MB beyond the core's "
          f"{i['core_mb']} MB; largest {i['largest']}")
