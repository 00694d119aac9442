"""Retrieval benchmarks behind `byref bench search`: dev splits, the fusion weight, the re-rank,
encoders, the first search; encode and search latency (`retrieval_latency`), the embeddings
extra's installed size (`retrieval_install`) and the real catalog's hand-written queries
(`retrieval_queries`) live beside it and are re-exported here.

The law: a setting is chosen on dev split A (MetaTool rows outside the fixed sample) and
confirmed on the disjoint split B; the fixed sample is only ever reported, never tuned on. Rows
whose query text is also a sample query are left out of both splits.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from byref.bench.search.retrieval_install import closure, extra_size
from byref.bench.search.retrieval_latency import Memo, encode_ms, hybrid_latency
from byref.bench.search.retrieval_queries import (
    TASK_QUERIES,
    VOCABULARY_PHRASINGS,
    VOCABULARY_QUERIES,
    read_phrasings,
    read_task_queries,
    task_queries,
)
from byref.discovery.catalog.catalog import Catalog
from byref.discovery.declaring.usage import query_key
from byref.discovery.lexical.index import Rerank
from byref.discovery.page.search import Ranker, Searcher

__all__ = ["TASK_QUERIES", "VOCABULARY_PHRASINGS", "VOCABULARY_QUERIES", "Memo", "closure",
           "dev_splits", "encode_ms", "extra_size", "first_search", "fusion_sweep",
           "hybrid_latency", "hybrid_sweep", "lexical_sets", "near_sweep", "read_phrasings",
           "read_task_queries", "recall", "rerank_table", "run", "task_queries"]

Rows = Sequence[dict[str, str]]
DEV_SIZE = 2000
DEV_SEED = 17
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
RERANKS: tuple[Rerank, ...] = ("none", "ties", "seed")


def dev_splits(sample: Rows, rest: Rows, size: int = DEV_SIZE,
               seed: int = DEV_SEED) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Two disjoint seeded splits of the rows outside the sample (A tunes, B confirms)."""
    asked = {query_key(r["Query"]) for r in sample}
    pool = [r for r in rest if query_key(r["Query"]) not in asked]
    rng = random.Random(seed)
    rng.shuffle(pool)
    return pool[:size], pool[size:2 * size]


def recall(rank: Callable[[str], list[str]], rows: Rows) -> dict[str, float]:
    """recall@1 and recall@5 of `rank` (query → lower-cased names) over MetaTool rows."""
    r1 = r5 = 0
    for row in rows:
        names = rank(row["Query"])
        gold = row["Tool"].lower()
        r1 += bool(names) and names[0] == gold
        r5 += gold in names[:5]
    n = len(rows) or 1
    return {"recall@1": round(r1 / n, 3), "recall@5": round(r5 / n, 3)}


def _names(searcher: Searcher) -> Callable[[str], list[str]]:
    # The ranking alone (excerpts do not change it).
    def rank(query: str) -> list[str]:
        index = searcher.index
        if searcher.ranker is not None:
            ranking = searcher.ranker.rank(index, query, None, 5)
        else:
            ranking = index.search(query, limit=5)
        return [h.entry.original_name.lower() for h in ranking.hits]
    return rank


def rerank_table(catalog: Catalog, splits: dict[str, Rows],
                 hybrid: Callable[[Rerank], Ranker] | None = None) -> dict[str, Any]:
    """Recall per re-rank mode, lexical (and hybrid), on each split."""
    out: dict[str, Any] = {}
    for mode in RERANKS:
        lexical = Searcher(catalog)
        index = catalog.index(rerank=mode)
        lexical.catalog = catalog

        def rank(query: str, index: Any = index) -> list[str]:
            return [h.entry.original_name.lower() for h in index.search(query, limit=5).hits]
        out[f"lexical/{mode}"] = {name: recall(rank, rows) for name, rows in splits.items()}
        if hybrid is not None:
            searcher = Searcher(catalog, ranker=hybrid(mode))
            out[f"hybrid/{mode}"] = {name: recall(_names(searcher), rows)
                                     for name, rows in splits.items()}
    return out


def fusion_sweep(catalog: Catalog, splits: dict[str, Rows], make: Callable[[float], Ranker],
                 weights: Iterable[float] = WEIGHTS) -> dict[str, Any]:
    """Recall per lexical weight on each split, and the weight that split A picks
    (the best recall@1 + recall@5 there)."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for weight in weights:
        searcher = Searcher(catalog, ranker=make(weight))
        table[str(weight)] = {name: recall(_names(searcher), rows)
                              for name, rows in splits.items()}
    first = next(iter(splits))
    chosen = max(table, key=lambda w: (table[w][first]["recall@1"] + table[w][first]["recall@5"],
                                       -abs(float(w) - 0.5)))
    return {"by_weight": table, "chosen_on": first, "chosen": float(chosen)}


def near_sweep(root: Path, catalog: Catalog, splits: dict[str, Rows]) -> dict[str, Any]:
    """Lexical recall with the near words (near_words.txt) and without, on each MetaTool split
    and on the real catalog's task-style and vocabulary queries."""
    out: dict[str, Any] = {}
    for label, options in (("near_words", {}), ("without", {"near_words": ()})):
        index = catalog.index(**options)

        def rank(query: str, index: Any = index) -> list[str]:
            return [h.entry.original_name.lower() for h in index.search(query, limit=5).hits]
        out[label] = {name: recall(rank, rows) for name, rows in splits.items()}
    for label, path in (("task", TASK_QUERIES), ("vocabulary", VOCABULARY_QUERIES)):
        found = task_queries(root, None, path)
        out["near_words"][label] = found["lexical"]
        out["without"][label] = found["lexical_without_near_words"]
    return out


def lexical_sets(root: Path) -> dict[str, dict[str, float]]:
    """Lexical recall@1/@5 (the default index) on every query set: MetaTool's fixed sample and
    dev splits A and B, the real catalog's task-style and vocabulary queries (a ranking constant
    is kept only if no set loses by it)."""
    from byref.bench.search.discovery import metatool_catalog, metatool_data

    descriptions, sample, rest = metatool_data(root)
    dev_a, dev_b = dev_splits(sample, rest)
    index = metatool_catalog(descriptions).index()

    def rank(query: str) -> list[str]:
        return [h.entry.original_name.lower() for h in index.search(query, limit=5).hits]
    out = {name: recall(rank, rows) for name, rows in
           (("metatool_sample", sample), ("metatool_A", dev_a), ("metatool_B", dev_b))}
    for label, path in (("task", TASK_QUERIES), ("vocabulary", VOCABULARY_QUERIES)):
        found = task_queries(root, None, path)["lexical"]
        out[label] = {k: found[k] for k in ("recall@1", "recall@5")}
    return out


def hybrid_sweep(root: Path, catalog: Catalog, splits: dict[str, Rows], ranker: Any,
                 setting: str, values: Iterable[float]) -> dict[str, Any]:
    """Hybrid recall per value of one `HybridRanker` setting (`density_weight`,
    `description_share`, `name_share`): on each MetaTool split, and on the real catalog's
    task-style and vocabulary queries."""
    out: dict[str, Any] = {}
    for weight in values:
        alike = ranker.with_weight(ranker.lexical_weight, **{setting: weight})
        searcher = Searcher(catalog, ranker=alike)
        row = {name: recall(_names(searcher), rows) for name, rows in splits.items()}
        for label, path in (("task", TASK_QUERIES), ("vocabulary", VOCABULARY_QUERIES)):
            row[label] = task_queries(root, alike, path, lexical=False)["hybrid"]
        out[str(weight)] = row
    return out


def run(root: Path, ranker: Any, notes: list[str]) -> dict[str, Any]:
    """Dev-split figures: fusion weight, re-rank modes, encoders, encode latency, extra size."""
    from byref.bench.search.discovery import (
        LATENCY_QUERIES,
        metatool_catalog,
        metatool_data,
        ranked,
        score,
    )
    from byref.discovery.hybrid.embed import HybridRanker

    descriptions, sample, rest = metatool_data(root)
    dev_a, dev_b = dev_splits(sample, rest)
    splits: dict[str, Rows] = {"A": dev_a, "B": dev_b}
    plain = metatool_catalog(descriptions)
    out: dict[str, Any] = {"dev_rows": {"A": len(dev_a), "B": len(dev_b)}}
    out["fusion"] = fusion_sweep(plain, splits, lambda w: ranker.with_weight(w))
    out["near_words"] = near_sweep(root, plain, splits)
    out["rerank"] = rerank_table(plain, splits, lambda mode: ranker.with_weight(
        ranker.lexical_weight, rerank=mode))
    out["density"] = hybrid_sweep(root, plain, splits, ranker, "density_weight", (0.0, 0.6))
    out["description_share"] = hybrid_sweep(root, plain, splits, ranker, "description_share",
                                            (0.0, 0.3, 0.5, 0.7))
    out["name_share"] = hybrid_sweep(root, plain, splits, ranker, "name_share",
                                     (0.0, 0.15, 0.2, 0.25))
    raw = ranker.encoder.inner if isinstance(ranker.encoder, Memo) else ranker.encoder
    out["encode_1_thread"] = encode_ms(raw, LATENCY_QUERIES)
    try:
        from byref.discovery.hybrid.encoder import TorchMiniLM

        torch = TorchMiniLM()
    except ImportError as exc:
        notes.append(f"PyTorch reference not measured: {exc}")
    else:
        memo = Memo(torch)
        out["torch"] = {
            "embedding_only": score(ranked(Searcher(plain, ranker=HybridRanker(
                memo, lexical_weight=0.0))), sample),
            "hybrid": score(ranked(Searcher(plain, ranker=HybridRanker(
                memo, lexical_weight=ranker.lexical_weight))), sample),
            "encode_1_thread": encode_ms(torch, LATENCY_QUERIES),
        }
    out["install"] = extra_size()
    out["task_queries"] = task_queries(root, ranker)
    out["vocabulary_queries"] = task_queries(root, ranker, VOCABULARY_QUERIES)
    return out


# -- the on-disk vector cache ----------------------------------------------------------------
def first_search(root: Path, query: str = "create a github issue",
                 encoder: str | None = None) -> dict[str, Any]:
    """The first hybrid search on the real catalog (2,565 tools) as a fresh process sees it:
    encoder built, document vectors made, one search, with an empty vector cache (cold) and
    then, in a new ranker and encoder, with the cache the cold run wrote (warm)."""
    import tempfile

    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings
    from byref.discovery.hybrid.embed import HybridRanker
    from byref.discovery.hybrid.encoder import load_encoder

    catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    out: dict[str, Any] = {"tools": len(catalog), "query": query}
    with tempfile.TemporaryDirectory(prefix="byref-vectors-") as tmp:
        names = {}
        for run_name in ("cold", "warm"):
            start = time.perf_counter()
            ranker = HybridRanker(load_encoder(encoder), vector_cache=tmp)
            hits = Searcher(catalog, ranker=ranker).search(query).results
            out[f"{run_name}_s"] = round(time.perf_counter() - start, 3)
            out[f"{run_name}_encoded"] = ranker.encoded
            names[run_name] = [h.name for h in hits]
        out["cache_mb"] = round(sum(p.stat().st_size for p in Path(tmp).glob("*.vec")) / 1e6, 1)
        # warm p50: distinct queries in the warmed process (each query encoded once)
        searcher = Searcher(catalog, ranker=ranker)
        out["warm_p50_s"] = _p50(searcher, WARM_QUERIES)
        # a restarted gateway: background mode, prepared at start (as build_toolbox does),
        # then its first search (a query not asked before) once the vectors are read
        restarted = HybridRanker(load_encoder(encoder), vector_cache=tmp, background=True)
        restarted.prepare(catalog.index).join(120)
        start = time.perf_counter()
        Searcher(catalog, ranker=restarted).search("delete a kubernetes pod")
        out["restarted_first_s"] = round(time.perf_counter() - start, 4)
        out["restarted_encoded"] = restarted.encoded
        out["restarted_over_warm_p50"] = (round(out["restarted_first_s"] / out["warm_p50_s"], 1)
                                          if out["warm_p50_s"] else None)
    with tempfile.TemporaryDirectory(prefix="byref-vectors-") as tmp:
        # a first-ever start in background mode: the first search answers lexically
        ranker = HybridRanker(load_encoder(encoder), vector_cache=tmp, background=True)
        catalog.index()  # built, as the gateway's toolbox has it: only the vectors are missing
        start = time.perf_counter()
        Searcher(catalog, ranker=ranker).search(query)
        out["first_ever_background_s"] = round(time.perf_counter() - start, 3)
        out["first_ever_lexical"] = ranker.lexical_answers == 1
        ranker.stop()
    out["cold_over_warm"] = round(out["cold_s"] / out["warm_s"], 1) if out["warm_s"] else None
    out["same_results"] = names["cold"] == names["warm"]
    out["lexical_first_100"] = lexical_first(root)
    return out


WARM_QUERIES = ("list open pull requests", "query the postgres database", "send a slack message",
                "upload a file to s3", "restart a deployment", "search the web",
                "create a jira ticket", "read a notion page", "take a browser screenshot")


def _p50(searcher: Searcher, queries: Sequence[str]) -> float:
    times = []
    for q in queries:
        start = time.perf_counter()
        searcher.search(q)
        times.append(time.perf_counter() - start)
    return round(sorted(times)[len(times) // 2], 4)


def lexical_first(root: Path, tools: int = 100, query: str = "create a github issue"
                  ) -> dict[str, float]:
    """The first lexical search over the first `tools` of the real catalog as a fresh process
    meets it (the index built, the packaged near words loaded), then the second."""
    from byref.discovery.catalog.catalog import Catalog
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings
    from byref.discovery.lexical import related

    full = catalog_from_listings(read_listings(root / "mcp-catalog"))
    related.forget_packaged()  # as a new process has it
    catalog = Catalog()
    for entry in list(full)[:tools]:
        catalog.add(entry.tool, server=entry.server, original_name=entry.original_name)
    searcher = Searcher(catalog)
    out = {}
    for label in ("first_ms", "second_ms"):
        start = time.perf_counter()
        searcher.search(query)
        out[label] = round((time.perf_counter() - start) * 1000, 1)
    return out


