"""Discovery benchmarks: retrieval quality, search latency, index build time, standing surface.

The law: every figure is measured in this run on data read from `shared/eval` (never copied into
the repo); latencies are reported both absolute (p50/p95, ms) and as ratios to a fixed
reference workload timed in the same run, so figures from different machines compare.
MetaTool is scored on the fixed 3,000-query sample of `shared/eval/README.md`
(`random.seed(0); random.sample(rows, 3000)`); anything tuned was tuned on other rows.
"""

from __future__ import annotations

import csv
import json
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from byref.bench.search.search_baselines import baseline_latency
from byref.discovery.catalog.catalog import Catalog
from byref.discovery.catalog.mcp import Listed, catalog_from_listings, read_listings, safe_name
from byref.discovery.declaring.declare import Declared, declare
from byref.discovery.declaring.scaffold import discovery_tools
from byref.discovery.declaring.usage import SearchUsage, learn_glossary, query_key
from byref.discovery.declaring.workingset import DEFAULT_BUDGET
from byref.discovery.lexical.index import BOOSTS, Filters, SearchIndex
from byref.discovery.page.search import Ranker, Searcher
from byref.jsonview import dumps
from byref.tools import Tool
from byref.transcript import Part, Transcript

BASELINES = {
    "plain BM25 (rank_bm25 Okapi)": {"recall@1": 0.412, "recall@5": 0.616},
    "all-MiniLM-L6-v2 embeddings": {"recall@1": 0.539, "recall@5": 0.764},
    "FastMCP 4.2.3 BM25SearchTransform": {"recall@1": 0.273, "recall@5": 0.427},
}
LATENCY_QUERIES = (
    "create a github issue", "list kubernetes pods in a namespace", "send a slack message",
    "query a dynamodb table", "read a file", "take a screenshot of the browser page",
    "refund a stripe payment", "search arxiv papers", "delete a droplet",
    "get cloudwatch metric alarms", "run a sql query", "list s3 buckets", "create a jira ticket",
    "update a notion page", "commit changes to git", "get the weather forecast",
    "search the web", "list docker containers", "create a postgres database branch",
    "get azure storage account keys", "find sentry errors for a project", "scrape a website",
    "create a google calendar event", "send an email with gmail", "list redis keys",
    "upload a file to google drive", "navigate to a url and click a button",
    "get aws cost and usage by service", "create a hubspot contact", "list datadog monitors",
    "deploy a cloudflare worker", "describe an eks cluster", "create a mongodb index",
    "search confluence pages", "get pull request comments", "list postman collections",
    "set a launchdarkly feature flag", "parse source code into a syntax tree",
    "write a note to obsidian", "list elasticsearch indices",
)


def eval_dir() -> Path:
    """`shared/eval` beside the repository (…/main → …/shared/eval)."""
    return Path(__file__).resolve().parents[4].parent / "shared" / "eval"


# -- MetaTool --------------------------------------------------------------------------------
def metatool_data(root: Path) -> tuple[dict[str, str], list[dict[str, str]], list[dict[str, str]]]:
    """(tool → description, the fixed 3,000-row sample, every other row)."""
    descriptions = json.loads((root / "metatool" / "plugin_des.json").read_text("utf-8"))
    with (root / "metatool" / "all_clean_data.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    random.seed(0)
    sample = random.sample(rows, 3000)
    chosen = {id(r) for r in sample}
    return descriptions, sample, [r for r in rows if id(r) not in chosen]


def metatool_catalog(descriptions: dict[str, str]) -> Catalog:
    """A catalog of MetaTool's tools (provider-safe names, the original kept), no parameters."""
    catalog = Catalog()
    for name, description in descriptions.items():
        catalog.add(Tool(name=safe_name(name), description=description, fn=_noop,
                         input_schema={"type": "object", "properties": {}}),
                    original_name=name)
    return catalog


def _noop() -> None:
    return None


def score(rank: Callable[[str], list[str]], rows: Sequence[dict[str, str]]) -> dict[str, float]:
    """recall@1, recall@5 and MRR of `rank` (query → lower-cased names) over MetaTool rows."""
    r1 = r5 = 0
    mrr = 0.0
    for row in rows:
        names = rank(row["Query"])
        gold = row["Tool"].lower()
        if gold in names:
            position = names.index(gold) + 1
            mrr += 1.0 / position
            r1 += position == 1
            r5 += position <= 5
    n = len(rows) or 1
    return {"recall@1": round(r1 / n, 3), "recall@5": round(r5 / n, 3), "mrr": round(mrr / n, 3)}


def ranked(searcher: Searcher) -> Callable[[str], list[str]]:
    """query → the searcher's top 10 server-side tool names, lower-cased."""
    return lambda q: [r.tool.lower() for r in searcher.search(q, limit=10).results]


def _index_ranked(index: SearchIndex) -> Callable[[str], list[str]]:
    """The index's own order (no excerpts: they do not change the ranking)."""
    return lambda q: [h.entry.original_name.lower() for h in index.search(q, limit=10).hits]


def training_usage(sample: Sequence[dict[str, str]], rest: Sequence[dict[str, str]]
                   ) -> list[SearchUsage]:
    """The rows outside the sample as usage evidence, minus any row whose query text (case and
    spacing aside) is also a sample query, so nothing learned is a question later asked."""
    asked = {query_key(r["Query"]) for r in sample}
    return [SearchUsage(r["Query"], r["Tool"]) for r in rest if query_key(r["Query"]) not in asked]


def learned_catalog(descriptions: dict[str, str], usage: Sequence[SearchUsage]) -> Catalog:
    """`metatool_catalog` after learning a glossary from `usage` (every tool must exist)."""
    catalog = metatool_catalog(descriptions)
    unknown = catalog.learn(learn_glossary(usage))
    if unknown:
        raise ValueError(f"Usage names tools the catalog lacks: {sorted(unknown)!r}")
    return catalog


def per_tool(usage: Sequence[SearchUsage], k: int, seed: int = 5) -> list[SearchUsage]:
    """At most `k` pieces of evidence per tool (a seeded choice): a young deployment's log."""
    by_tool: dict[str, list[SearchUsage]] = defaultdict(list)
    for u in usage:
        by_tool[u.tool.lower()].append(u)
    rng = random.Random(seed)
    return [u for tool in sorted(by_tool) for u in
            rng.sample(by_tool[tool], min(k, len(by_tool[tool])))]


def metatool(root: Path, *, ranker: Ranker | None = None,
             curve: Sequence[int] = (5, 10, 20, 40)) -> dict[str, Any]:
    """Recall@1/@5 and MRR on the fixed sample.

    Zero-shot (documents = name + description, as the baselines): with the generic synonym table
    (synonyms.txt), without it, without the re-rank, and with the re-rank over every match (the
    keys as first written). Learned: the same catalog after `Catalog.learn` from the rows outside
    the sample read as a usage log (`usage.learn_glossary`), with all of them and with at most k
    per tool (the learning curve)."""
    descriptions, sample, rest = metatool_data(root)
    usage = training_usage(sample, rest)
    plain = metatool_catalog(descriptions)
    learned = learned_catalog(descriptions, usage)
    out: dict[str, Any] = {
        "queries": len(sample), "tools": len(plain), "baselines": BASELINES,
        "lexical": score(ranked(Searcher(plain)), sample),
        "lexical_without_synonyms": score(_index_ranked(plain.index(synonyms=())), sample),
        "lexical_without_rerank": score(_index_ranked(plain.index(rerank="none")), sample),
        "lexical_seed_rerank": score(_index_ranked(plain.index(rerank="seed")), sample),
        "lexical_rerank_all": score(_index_ranked(
            plain.index(rerank="seed", rerank_depth=len(plain))), sample),
        "usage_rows": len(usage),
        "usage_rows_dropped_as_sample_duplicates": len(rest) - len(usage),
        "lexical_learned": score(ranked(Searcher(learned)), sample),
        "lexical_learned_without_rerank": score(
            _index_ranked(learned.index(rerank="none")), sample),
        "lexical_learned_curve": {
            str(k): score(ranked(Searcher(learned_catalog(descriptions, per_tool(usage, k)))),
                          sample)
            for k in curve
        },
    }
    if ranker is not None:
        out["hybrid"] = score(ranked(Searcher(plain, ranker=ranker)), sample)
        out["embedding_only"] = score(ranked(Searcher(plain, ranker=_alike(ranker, 0.0))),
                                      sample)
        out["hybrid_learned"] = score(ranked(Searcher(learned, ranker=ranker)), sample)
    return out


# -- the real MCP catalog -------------------------------------------------------------------
def replicate(listed: Sequence[Listed], size: int) -> list[Listed]:
    """`listed` grown to `size` tools by copies renamed `<name>_r<k>` on the same servers, so
    the capability roots (and the standing surface) stay what they are."""
    out = list(listed)
    copy = 1
    while len(out) < size:
        for t in listed:
            if len(out) >= size:
                break
            out.append(Listed(t.server, f"{t.name}_r{copy}", t.description, t.input_schema,
                              t.annotations))
        copy += 1
    return out


def _reference_ms() -> float:
    """A fixed pure-Python workload (sort 20,000 seeded floats), the latency yardstick."""
    rng = random.Random(7)
    values = [rng.random() for _ in range(20_000)]
    times = []
    for _ in range(15):
        start = time.perf_counter()
        sorted(values)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(catalog: Catalog, queries: Iterable[str] = LATENCY_QUERIES,
            rounds: int = 5, ranker: Ranker | None = None) -> dict[str, float]:
    """search_tools' work (filters, ranking, excerpts) per query; half the runs filtered."""
    searcher = Searcher(catalog, ranker=ranker)
    index = searcher.index
    roots = catalog.capability_roots()
    plan: list[tuple[str, Filters | None]] = []
    for i, q in enumerate(queries):
        plan.append((q, None))
        plan.append((q, Filters(capabilities=(roots[i % len(roots)],))))
    for q, f in plan:  # warm the stem memo; the index is built already
        searcher.search(q, filters=f)
    times = []
    for _ in range(rounds):
        for q, f in plan:
            start = time.perf_counter()
            searcher.search(q, filters=f)
            times.append((time.perf_counter() - start) * 1e3)
    return {"tools": len(index), "searches": len(times),
            "p50_ms": round(_percentile(times, 0.5), 3),
            "p95_ms": round(_percentile(times, 0.95), 3)}


def build_ms(catalog: Catalog, rounds: int = 3) -> float:
    """Fastest of `rounds` search-index builds, in milliseconds."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        SearchIndex(catalog)
        times.append((time.perf_counter() - start) * 1e3)
    return round(min(times), 1)


def surface(catalog: Catalog, budget: int = DEFAULT_BUDGET) -> dict[str, int]:
    """Standing tool surface in characters (system lines + declarations as JSON)."""
    scaffolding = list(discovery_tools(Searcher(catalog)))

    def with_active(names: list[str], refs: bool = True) -> Declared:
        transcript = Transcript()
        transcript.append("user", [Part(type="text", value="go")])
        if names:
            call = {"name": "activate_tool", "id": "a1", "input": {"names": names}}
            transcript.append("assistant", [Part(type="tool_call", value=call,
                                                 tool="activate_tool", call_id="a1")])
        return declare(catalog, scaffolding, transcript, budget=budget, refs=refs)

    sizes = sorted((len(dumps(t.declaration())), t.name) for t in catalog.tools())
    middle = len(sizes) // 2
    median_set = [n for _, n in sizes[max(0, middle - budget // 2):][:budget]]
    largest = [n for _, n in sizes[-budget:]]
    return {
        "tools": len(catalog),
        "capability_roots": len(catalog.capability_roots()),
        "turn1_chars": with_active([]).chars(),
        "working_set_chars": with_active(median_set).chars(),
        "working_set_largest_chars": with_active(largest).chars(),
        "working_set_plain_chars": with_active(median_set, refs=False).chars(),
        "all_declared_chars": len(dumps([t.declaration() for t in catalog.tools()])),
        "median_declaration_chars": sizes[middle][0] if sizes else 0,
    }


def mcp(root: Path, sizes: Sequence[int] = (2565, 10_000),
        ranker: Ranker | None = None) -> dict[str, Any]:
    """Latency, build time and surface at each size; hybrid search latency too, when a ranker
    is given (lexical and hybrid interleaved query by query, one thread each)."""
    listed = read_listings(root / "mcp-catalog")
    out: dict[str, Any] = {"reference_ms": round(_reference_ms(), 3), "sizes": []}
    for size in sizes:
        catalog = catalog_from_listings(replicate(listed, size))
        row: dict[str, Any] = {"tools": len(catalog), "build_ms": build_ms(catalog)}
        row["search"] = latency(catalog)
        row["engines"] = baseline_latency(catalog, LATENCY_QUERIES)
        if ranker is not None:
            from byref.bench.search.retrieval import hybrid_latency

            row["hybrid_search"] = hybrid_latency(catalog, ranker, LATENCY_QUERIES)
            for key in ("p50", "p95"):
                row["hybrid_search"][f"{key}_ratio"] = round(
                    row["hybrid_search"][f"{key}_ms"] / out["reference_ms"], 3)
        row["search"]["p50_ratio"] = round(row["search"]["p50_ms"] / out["reference_ms"], 3)
        row["search"]["p95_ratio"] = round(row["search"]["p95_ms"] / out["reference_ms"], 3)
        row["build_ratio"] = round(row["build_ms"] / out["reference_ms"], 1)
        row["surface"] = surface(catalog)
        out["sizes"].append(row)
    return out


def param_boost_sweep(root: Path, boosts: Sequence[float] = (0.0, 0.25, 0.5, 1.0, 2.0)
                      ) -> dict[str, float]:
    """Proxy for the parameters field's boost (no labelled queries carry parameters): on the
    real catalog, query each tool by the words of its own name with the name field switched
    off (words reversed, so it is never the exact name), and report MRR of finding it.
    Parameters earn their keep if MRR rises with them."""
    catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    entries = list(catalog)
    rng = random.Random(3)
    probe = rng.sample(entries, min(400, len(entries)))
    out = {}
    for boost in boosts:
        index = catalog.index(boosts={**BOOSTS, "name": 0.0, "parameters": boost})
        mrr = 0.0
        for entry in probe:
            # reversed, so the query is never the exact name (bag of words: same terms)
            query = " ".join(reversed([w for w, _, _ in index.analyzer.words(entry.name)]))
            names = [h.entry.name for h in index.search(query, limit=10).hits]
            if entry.name in names:
                mrr += 1.0 / (names.index(entry.name) + 1)
        out[str(boost)] = round(mrr / len(probe), 3)
    return out


def run(root: Path | None = None, *, hybrid: bool = True,
        encoder: str | None = None) -> dict[str, Any]:
    """Every figure, as one JSON-able dict (`byref bench search --json`); `encoder`: the hybrid's
    sentence encoder (a package name or path, `encoder.load_encoder`; None: the default)."""
    root = root or eval_dir()
    if not (root / "metatool").is_dir() or not (root / "mcp-catalog").is_dir():
        raise FileNotFoundError(
            f"Benchmark data not found at {str(root)!r} (expected metatool/ and mcp-catalog/)."
        )
    ranker: Ranker | None = None
    notes = []
    if hybrid:
        try:
            from byref.bench.search.retrieval import Memo
            from byref.discovery.hybrid.embed import HybridRanker
            from byref.discovery.hybrid.encoder import load_encoder

            ranker = HybridRanker(Memo(load_encoder(encoder)))
        except ImportError as exc:
            ranker = None
            notes.append(str(exc))
    from byref.bench.search.lexical_first import first_searches

    out: dict[str, Any] = {"metatool": metatool(root, ranker=ranker),
                           "mcp": mcp(root, ranker=ranker),
                           "param_boost_mrr": param_boost_sweep(root),
                           "lexical_first": first_searches(root)}
    if ranker is not None:
        from byref.bench.search import retrieval as bench_retrieval

        out["retrieval"] = bench_retrieval.run(root, ranker, notes)
        out["first_search"] = bench_retrieval.first_search(root, encoder=encoder)
    from byref.bench.search import abstention

    out["abstention"] = {"lexical": abstention.run(root, None)}
    if ranker is not None:
        out["abstention"]["hybrid"] = abstention.run(root, ranker)
    if notes:
        out["notes"] = notes
    return out


def _alike(ranker: Ranker, lexical_weight: float) -> Ranker:
    """The hybrid ranker with another weight, sharing its encoder and vectors."""
    from byref.discovery.hybrid.embed import HybridRanker

    assert isinstance(ranker, HybridRanker)
    return ranker.with_weight(lexical_weight)
