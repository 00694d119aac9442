"""Retrieval benchmarks behind `byref bench search`: dev splits, the fusion weight, the re-rank,
encoders, encode latency and the embeddings extra's installed size.

The law: a setting is chosen on dev split A (MetaTool rows outside the fixed sample) and
confirmed on the disjoint split B; the fixed sample is only ever reported, never tuned on. Rows
whose query text is also a sample query are left out of both splits.
"""

from __future__ import annotations

import contextlib
import random
import re
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from byref.discovery.catalog import Catalog
from byref.discovery.index import Rerank
from byref.discovery.search import Ranker, Searcher
from byref.discovery.usage import query_key

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


def hybrid_sweep(root: Path, catalog: Catalog, splits: dict[str, Rows], ranker: Any,
                 setting: str, values: Iterable[float]) -> dict[str, Any]:
    """Hybrid recall per value of one `HybridRanker` setting (`density_weight`,
    `description_share`): on each MetaTool split, and on the real catalog's task-style and
    vocabulary queries."""
    out: dict[str, Any] = {}
    for weight in values:
        alike = ranker.with_weight(ranker.lexical_weight, **{setting: weight})
        searcher = Searcher(catalog, ranker=alike)
        row = {name: recall(_names(searcher), rows) for name, rows in splits.items()}
        for label, path in (("task", TASK_QUERIES), ("vocabulary", VOCABULARY_QUERIES)):
            row[label] = task_queries(root, alike, path, lexical=False)["hybrid"]
        out[str(weight)] = row
    return out


def encode_ms(encoder: Any, queries: Sequence[str], rounds: int = 3) -> dict[str, float]:
    """One query a call (the search path), after one warm-up pass."""
    for q in queries:
        encoder.encode([q])
    times = []
    for _ in range(rounds):
        for q in queries:
            start = time.perf_counter()
            encoder.encode([q])
            times.append((time.perf_counter() - start) * 1e3)
    return {"p50_ms": round(statistics.median(times), 3),
            "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 3)}


# -- installed size ----------------------------------------------------------------------------
def _requirement_names(dist: metadata.Distribution, extra: str | None) -> list[str]:
    out = []
    for req in dist.requires or []:
        name, _, marker = req.partition(";")
        marker = marker.strip()
        wants_extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        if wants_extra and wants_extra.group(1) != extra:
            continue
        if not wants_extra and marker and not _marker_holds(marker):
            continue
        out.append(re.split(r"[\s\[<>=!~(;]", name.strip(), maxsplit=1)[0])
    return out


def _marker_holds(marker: str) -> bool:
    try:
        from packaging.markers import Marker
    except ImportError:  # without packaging, count the dependency
        return True
    return bool(Marker(marker).evaluate())


def closure(names: Iterable[str]) -> dict[str, int]:
    """Installed distributions reachable from `names` → bytes their files take on disk."""
    seen: dict[str, int] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            seen[key] = 0
            continue
        size = 0
        for f in dist.files or []:
            with contextlib.suppress(OSError):
                size += Path(str(f.locate())).stat().st_size
        seen[key] = size
        todo.extend(_requirement_names(dist, None))
    return seen


def extra_size(extra: str = "embeddings", project: str = "byref") -> dict[str, Any]:
    """Megabytes the extra's requirements (and theirs) take beyond the core install, as
    installed in this environment."""
    dist = metadata.distribution(project)
    core = closure(_requirement_names(dist, None))
    wanted = [n for n in _requirement_names(dist, extra)
              if n not in _requirement_names(dist, None)]
    extra_dists = closure(wanted)
    beyond = {k: v for k, v in extra_dists.items() if k not in core}
    missing = sorted(k for k, v in beyond.items() if v == 0)
    return {"extra_mb": round(sum(beyond.values()) / 1e6, 1),
            "core_mb": round(sum(core.values()) / 1e6, 1),
            "largest": sorted(((k, round(v / 1e6, 1)) for k, v in beyond.items()),
                              key=lambda kv: -kv[1])[:5],
            "not_installed": missing}


# -- encoders and latency ----------------------------------------------------------------------
class Memo:
    """An encoder that remembers every text it encoded (the benchmark asks the same queries of
    many settings; never used on the search path, where `HybridRanker` keeps a bounded cache)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._known: dict[str, Any] = {}

    def encode(self, texts: Sequence[str]) -> Any:
        """The inner encoder's rows, encoding only texts not seen before."""
        import numpy as np

        fresh = [t for t in dict.fromkeys(texts) if t not in self._known]
        if fresh:
            self._known.update(zip(fresh, self.inner.encode(fresh), strict=True))
        return np.stack([self._known[t] for t in texts])


_COPY = re.compile(r"^(.*?) r\d+: ")


class _Replicas:
    """Encodes a replicated tool (`<name>_r<k>`, same description) as its original: the
    latency of a search does not depend on the vectors' values, and encoding 7,435 copies
    would only heat the machine."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def encode(self, texts: Sequence[str]) -> Any:
        return self.inner.encode([_COPY.sub(r"\1: ", t, count=1) for t in texts])


def hybrid_latency(catalog: Catalog, ranker: Any, queries: Sequence[str],
                   rounds: int = 3) -> dict[str, Any]:
    """search_tools' work per query, lexical and hybrid interleaved query by query (half the
    runs filtered); the hybrid one encodes every query afresh on one thread (no query cache)."""
    from byref.discovery.embed import HybridRanker
    from byref.discovery.index import Filters

    raw = ranker.encoder
    raw = raw.inner if isinstance(raw, Memo) else raw
    hybrid = HybridRanker(_Replicas(Memo(raw) if not isinstance(ranker.encoder, Memo)
                                    else ranker.encoder), query_cache=0)
    started = time.perf_counter()
    hybrid.vectors(catalog.index())
    vectors_s = time.perf_counter() - started
    hybrid._encoder = _Replicas(raw)  # documents are in place; queries go to the model
    lexical, fused = Searcher(catalog), Searcher(catalog, ranker=hybrid)
    roots = catalog.capability_roots()
    plan = [(q, f) for i, q in enumerate(queries)
            for f in (None, Filters(capabilities=(roots[i % len(roots)],)))]
    for q, f in plan:
        lexical.search(q, filters=f)
        fused.search(q, filters=f)
    times: dict[str, list[float]] = {"lexical": [], "hybrid": []}
    for _ in range(rounds):
        for q, f in plan:
            for name, searcher in (("lexical", lexical), ("hybrid", fused)):
                start = time.perf_counter()
                searcher.search(q, filters=f)
                times[name].append((time.perf_counter() - start) * 1e3)
    lex_p50 = statistics.median(times["lexical"])
    hyb_p50 = statistics.median(times["hybrid"])
    return {"searches": len(times["hybrid"]), "p50_ms": round(hyb_p50, 3),
            "p95_ms": round(sorted(times["hybrid"])[int(0.95 * (len(plan) * rounds - 1))], 3),
            "lexical_p50_ms": round(lex_p50, 3),
            "hybrid_over_lexical_p50": round(hyb_p50 / lex_p50, 2) if lex_p50 else None,
            "document_vectors_s": round(vectors_s, 1)}


def run(root: Path, ranker: Any, notes: list[str]) -> dict[str, Any]:
    """Dev-split figures: fusion weight, re-rank modes, encoders, encode latency, extra size."""
    from byref.bench.discovery import (
        LATENCY_QUERIES,
        metatool_catalog,
        metatool_data,
        ranked,
        score,
    )
    from byref.discovery.embed import HybridRanker

    descriptions, sample, rest = metatool_data(root)
    dev_a, dev_b = dev_splits(sample, rest)
    splits: dict[str, Rows] = {"A": dev_a, "B": dev_b}
    plain = metatool_catalog(descriptions)
    out: dict[str, Any] = {"dev_rows": {"A": len(dev_a), "B": len(dev_b)}}
    out["fusion"] = fusion_sweep(plain, splits, lambda w: ranker.with_weight(w))
    out["rerank"] = rerank_table(plain, splits, lambda mode: ranker.with_weight(
        ranker.lexical_weight, rerank=mode))
    out["density"] = hybrid_sweep(root, plain, splits, ranker, "density_weight", (0.0, 0.6))
    out["description_share"] = hybrid_sweep(root, plain, splits, ranker, "description_share",
                                            (0.0, 0.3, 0.5, 0.7))
    raw = ranker.encoder.inner if isinstance(ranker.encoder, Memo) else ranker.encoder
    out["encode_1_thread"] = encode_ms(raw, LATENCY_QUERIES)
    try:
        from byref.discovery.encoder import TorchMiniLM

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
def first_search(root: Path, query: str = "create a github issue") -> dict[str, Any]:
    """The first hybrid search on the real catalog (2,565 tools) as a fresh process sees it:
    encoder built, document vectors made, one search, with an empty vector cache (cold) and
    then, in a new ranker and encoder, with the cache the cold run wrote (warm)."""
    import tempfile

    from byref.discovery.embed import HybridRanker
    from byref.discovery.encoder import OnnxMiniLM
    from byref.discovery.mcp import catalog_from_listings, read_listings

    catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    out: dict[str, Any] = {"tools": len(catalog), "query": query}
    with tempfile.TemporaryDirectory(prefix="byref-vectors-") as tmp:
        names = {}
        for run_name in ("cold", "warm"):
            start = time.perf_counter()
            ranker = HybridRanker(OnnxMiniLM(), vector_cache=tmp)
            hits = Searcher(catalog, ranker=ranker).search(query).results
            out[f"{run_name}_s"] = round(time.perf_counter() - start, 3)
            out[f"{run_name}_encoded"] = ranker.encoded
            names[run_name] = [h.name for h in hits]
        out["cache_mb"] = round(sum(p.stat().st_size for p in Path(tmp).glob("*.vec")) / 1e6, 1)
    out["cold_over_warm"] = round(out["cold_s"] / out["warm_s"], 1) if out["warm_s"] else None
    out["same_results"] = names["cold"] == names["warm"]
    return out


# -- task-style queries on the real catalog ----------------------------------------------------
TASK_QUERIES = Path(__file__).with_name("task_queries.txt")


def read_task_queries(path: Path = TASK_QUERIES) -> list[tuple[str, frozenset[str]]]:
    """(query, acceptable tool names) per line of `path`."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, *tools = line.split("\t")
        out.append((query, frozenset(tools)))
    return out


VOCABULARY_QUERIES = Path(__file__).with_name("vocabulary_queries.txt")
VOCABULARY_PHRASINGS = Path(__file__).with_name("vocabulary_phrasings.txt")


def read_phrasings(path: Path = VOCABULARY_PHRASINGS) -> dict[str, list[str]]:
    """query → the other phrasings written for it (search_tools' `also`)."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, *others = line.split("\t")
            out[query] = others
    return out


def task_queries(root: Path, ranker: Ranker | None, path: Path = TASK_QUERIES, *,
                 lexical: bool = True) -> dict[str, Any]:
    """Recall@1/@5 of the hand-written task-style queries in `path` on the 2,565-tool catalog,
    lexical (with and without the synonym table) and hybrid; for the vocabulary dev queries also
    with their other phrasings fused (`Searcher.search(also=…)`)."""
    from byref.discovery.mcp import catalog_from_listings, read_listings

    catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    queries = read_task_queries(path)
    known = {e.name for e in catalog}
    unknown = sorted({t for _, tools in queries for t in tools} - known)
    if unknown:
        raise ValueError(f"task_queries.txt names tools the catalog lacks: {unknown!r}")

    def measure(rank: Callable[[str], list[str]]) -> dict[str, float]:
        r1 = r5 = 0
        for query, tools in queries:
            names = rank(query)
            r1 += bool(names) and names[0] in tools
            r5 += bool(tools.intersection(names[:5]))
        return {"recall@1": round(r1 / len(queries), 3), "recall@5": round(r5 / len(queries), 3)}

    def by_index(index: Any) -> Callable[[str], list[str]]:
        return lambda q: [h.entry.name for h in index.search(q, limit=5).hits]

    out: dict[str, Any] = {"queries": len(queries)}
    if lexical:
        out["lexical"] = measure(by_index(catalog.index()))
        out["lexical_without_synonyms"] = measure(by_index(catalog.index(synonyms=())))
    if ranker is not None:
        index = catalog.index()
        out["hybrid"] = measure(
            lambda q: [h.entry.name for h in ranker.rank(index, q, None, 5).hits])
    if path == VOCABULARY_QUERIES and lexical:
        also = read_phrasings()
        missing = sorted({q for q, _ in queries} - set(also))
        if missing:
            raise ValueError(f"vocabulary_phrasings.txt lacks the queries {missing!r}")
        for label, fused in (("lexical_also", Searcher(catalog)),
                             ("hybrid_also", Searcher(catalog, ranker=ranker))):
            if label == "hybrid_also" and ranker is None:
                continue
            def rank(q: str, s: Searcher = fused) -> list[str]:
                return [r.name for r in s.search(q, limit=5, also=also[q]).results]
            out[label] = measure(rank)
    return out
