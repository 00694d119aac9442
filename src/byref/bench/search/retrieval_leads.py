"""Leads for the hybrid's fusion, measured on held-apart data only
(`python -m byref.bench.search.retrieval_leads`): pseudo-relevance feedback, the max over a
document's views, rarity coverage inside the embedding's top N, more fusion features, a per-query
lexical weight and centred document vectors, each beside the shipped fusion, on MetaTool dev splits
A and B and the real catalog's task-style and vocabulary queries (never on the fixed sample).

The law: every variant scores the same matrices `HybridRanker` ranks from (`Frame`: its lexical
side, its document and query vectors), and the shipped variant, `fused`, orders exactly as
`HybridRanker.rank` does (an exact name first, ties to the lower doc number); a lead is one
function of a `Frame` to a (query × document) score matrix.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.hybrid.documents import document_text
from byref.discovery.hybrid.embed import HYBRID_K1, LEXICAL_WEIGHT, HybridRanker
from byref.discovery.lexical.text import split_words

Gold = Callable[[int, list[int]], tuple[bool, bool]]
"""(query row, its top 5 docs) → (hit at 1, hit in 5)."""


@dataclass
class Frame:
    """One catalog's queries as `HybridRanker` sees them, as matrices."""

    lexical: Any
    """BM25F (the hybrid's k1, no near words) of every doc per query, divided by the best."""
    coverage: Any
    """The share of the query's rarity weight (Σ w(t), the rarity weight w) each doc covers."""
    exact: Any
    """The doc a query names exactly, else -1."""
    queries: Any
    docs: Any
    """The ranker's document vectors (its views mixed)."""
    views: Any
    """Full text, description and name vectors, one (3 × docs × dim) stack."""


def frame(catalog: Catalog, ranker: HybridRanker, queries: Sequence[str]) -> Frame:
    """The matrices of `queries` on `catalog` under `ranker` (its encoder, vectors, k1)."""
    import numpy as np

    index = catalog.index()
    lexical_side = index.variant(k1=HYBRID_K1)
    n = len(index)
    lexical = np.zeros((len(queries), n))
    coverage = np.zeros((len(queries), n))
    exact = np.full(len(queries), -1)
    for row, query in enumerate(queries):
        scored = lexical_side.score(query, None, near=False)
        for doc, score in scored.scores.items():
            lexical[row, doc] = score
        total = sum(scored.weights.values()) or 1.0
        for doc in scored.masks:
            coverage[row, doc] = sum(scored.weights[t] for t in scored.covered(doc)) / total
        if scored.exact is not None:
            exact[row] = scored.exact
    top = lexical.max(axis=1, keepdims=True)
    lexical = np.divide(lexical, top, out=np.zeros_like(lexical), where=top > 0)
    texts = []
    for doc in range(n):
        entry = index.entries[doc]
        full = document_text(index, doc)
        texts.append((full, entry.description.strip() or full,
                      split_words(entry.original_name) or full))
    encoded = dict(zip(*_unique(ranker, [t for three in texts for t in three]), strict=True))
    views = np.stack([np.stack([encoded[three[k]] for three in texts]) for k in range(3)])
    return Frame(lexical, coverage, exact,
                 np.stack([ranker.query_vector(q) for q in queries]).astype(np.float64),
                 np.asarray(ranker.vectors(index), np.float64), views.astype(np.float64))


def _unique(ranker: HybridRanker, texts: list[str]) -> tuple[list[str], Any]:
    unique = list(dict.fromkeys(texts))
    return unique, ranker.encoder.encode(unique)


def _minmax(x: Any) -> Any:
    import numpy as np

    low, high = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    return np.divide(x - low, high - low, out=np.zeros_like(x), where=high > low)


def _unit(x: Any) -> Any:
    import numpy as np

    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def fuse(f: Frame, similarity: Any, weight: float = LEXICAL_WEIGHT) -> Any:
    """The shipped fusion of `similarity` (raw cosines) with the lexical side."""
    return weight * f.lexical + (1.0 - weight) * _minmax(similarity)


def cosines(f: Frame) -> Any:
    """Each query's cosine to each document vector."""
    return f.queries @ f.docs.T


def feedback(k: int, beta: float, source: str) -> Callable[[Frame], Any]:
    """Pseudo-relevance feedback: the query vector plus `beta` × the mean of the top `k`
    document vectors (of the fused or the embedding order), fused again."""
    def lead(f: Frame) -> Any:
        import numpy as np

        first = cosines(f)
        order = fuse(f, first) if source == "fused" else first
        top = np.argsort(-order, axis=1, kind="stable")[:, :k]
        moved = _unit(f.queries + beta * f.docs[top].mean(axis=1))
        return fuse(f, moved @ f.docs.T)
    return lead


def view_max(mix: float) -> Callable[[Frame], Any]:
    """(1 − mix) × the mixed vector's cosine + mix × the best of the three views' cosines."""
    def lead(f: Frame) -> Any:
        best = (f.views @ f.queries.T).max(axis=0).T
        return fuse(f, (1.0 - mix) * cosines(f) + mix * best)
    return lead


def coverage_top(n: int, weight: float) -> Callable[[Frame], Any]:
    """The fused score plus `weight` × rarity coverage, for the embedding's top `n` only."""
    def lead(f: Frame) -> Any:
        import numpy as np

        raw = cosines(f)
        kth = -np.sort(-raw, axis=1)[:, min(n, raw.shape[1]) - 1][:, None]
        return fuse(f, raw) + weight * f.coverage * (raw >= kth)
    return lead


def features(lexical: float, coverage: float) -> Callable[[Frame], Any]:
    """A third fusion feature: rarity coverage at `coverage`, lexical at `lexical`."""
    return lambda f: fuse(f, cosines(f), lexical) + coverage * f.coverage


def adaptive(gain: float) -> Callable[[Frame], Any]:
    """A per-query lexical weight, LEXICAL_WEIGHT + gain × (the lexical leader's margin
    over the second, as a share of its score, − 0.5)."""
    def lead(f: Frame) -> Any:
        import numpy as np

        ordered = np.sort(f.lexical, axis=1)
        margin = ordered[:, -1] - (ordered[:, -2] if ordered.shape[1] > 1 else 0.0)
        weight = np.clip(LEXICAL_WEIGHT + gain * (margin - 0.5), 0.0, 1.0)[:, None]
        return weight * f.lexical + (1.0 - weight) * _minmax(cosines(f))
    return lead


def centred(f: Frame) -> Any:
    """Document vectors less the catalog's mean vector (query as is)."""
    return fuse(f, f.queries @ _unit(f.docs - f.docs.mean(axis=0)).T)


LEADS: dict[str, Callable[[Frame], Any]] = {
    "fused": lambda f: fuse(f, cosines(f)),
    **{f"feedback/{s}/k{k}/b{b}": feedback(k, b, s)
       for s in ("fused", "embedding") for k in (1, 3, 10) for b in (0.1, 0.25, 0.5)},
    **{f"view_max/{m}": view_max(m) for m in (0.25, 0.5, 1.0)},
    **{f"coverage_top/{n}/{w}": coverage_top(n, w) for n in (10, 20) for w in (0.05, 0.1, 0.2)},
    **{f"features/lex{a}/cov{c}": features(a, c) for a in (0.2, 0.3) for c in (0.05, 0.1, 0.2)},
    **{f"adaptive/{g}": adaptive(g) for g in (-0.1, 0.1, 0.2)},
    "centred": centred,
}


def top5(f: Frame, scores: Any) -> Any:
    """The first five docs of each row: the exact name first, ties to the lower doc."""
    import numpy as np

    scores = scores.copy()
    rows = np.flatnonzero(f.exact >= 0)
    scores[rows, f.exact[rows]] = np.inf
    return np.argsort(-scores, axis=1, kind="stable")[:, :5]


def recall_of(f: Frame, scores: Any, gold: Gold) -> dict[str, float]:
    """recall@1 and recall@5 of `scores` under `gold`."""
    hits = [gold(row, [int(d) for d in docs]) for row, docs in enumerate(top5(f, scores))]
    n = len(hits) or 1
    return {"recall@1": round(sum(h[0] for h in hits) / n, 3),
            "recall@5": round(sum(h[1] for h in hits) / n, 3)}


def _by_name(names: list[str], golds: list[str]) -> Gold:
    """MetaTool: the one labelled tool, by lower-cased original name."""
    def gold(row: int, docs: list[int]) -> tuple[bool, bool]:
        return names[docs[0]] == golds[row], golds[row] in [names[d] for d in docs]
    return gold


def _any_of(ids: list[str], tools: list[frozenset[str]]) -> Gold:
    """The hand-written queries: any of the tools that meet the need."""
    def gold(row: int, docs: list[int]) -> tuple[bool, bool]:
        return ids[docs[0]] in tools[row], bool(tools[row].intersection(ids[d] for d in docs))
    return gold


def leads(root: Path, ranker: HybridRanker,
          chosen: dict[str, Callable[[Frame], Any]] | None = None) -> dict[str, Any]:
    """Recall of each lead on MetaTool dev splits A and B and on the real catalog's task-style
    and vocabulary queries; and the lead split A picks (best recall@1 + recall@5)."""
    from byref.bench.search.discovery import metatool_catalog, metatool_data
    from byref.bench.search.retrieval import dev_splits
    from byref.bench.search.retrieval_queries import (
        TASK_QUERIES,
        VOCABULARY_QUERIES,
        read_task_queries,
    )
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    chosen = LEADS if chosen is None else chosen
    descriptions, sample, rest = metatool_data(root)
    plain = metatool_catalog(descriptions)
    names = [e.original_name.lower() for e in plain.index().entries]
    sets: list[tuple[str, Catalog, list[str], Gold]] = []
    for label, rows in zip("AB", dev_splits(sample, rest), strict=True):
        sets.append((label, plain, [r["Query"] for r in rows],
                     _by_name(names, [r["Tool"].lower() for r in rows])))
    real = catalog_from_listings(read_listings(root / "mcp-catalog"))
    ids = [e.name for e in real.index().entries]
    for label, path in (("task", TASK_QUERIES), ("vocabulary", VOCABULARY_QUERIES)):
        written = read_task_queries(path)
        sets.append((label, real, [q for q, _ in written],
                     _any_of(ids, [t for _, t in written])))
    table: dict[str, dict[str, dict[str, float]]] = {name: {} for name in chosen}
    for label, catalog, queries, gold in sets:
        f = frame(catalog, ranker, queries)
        for name, lead in chosen.items():
            table[name][label] = recall_of(f, lead(f), gold)
    pick = max(table, key=lambda n: table[n]["A"]["recall@1"] + table[n]["A"]["recall@5"])
    return {"by_lead": table, "chosen_on": "A", "chosen": pick}


def main(argv: Sequence[str] = ()) -> int:
    """Print the leads table (JSON with `--json`) for ../shared/eval or the named directory."""
    from byref.bench.search.discovery import eval_dir
    from byref.bench.search.retrieval_latency import Memo
    from byref.discovery.hybrid.encoder import OnnxMiniLM

    args = [a for a in argv if a != "--json"]
    root = Path(args[0]) if args else eval_dir()
    out = leads(root, HybridRanker(Memo(OnnxMiniLM()), query_cache=0))
    if "--json" in argv:
        print(json.dumps(out, indent=2))
        return 0
    for name, row in out["by_lead"].items():
        cells = "  ".join(f"{k} {m['recall@1']:.3f}/{m['recall@5']:.3f}" for k, m in row.items())
        mark = "  <- best on A" if name == out["chosen"] else ""
        print(f"{name:32} {cells}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
