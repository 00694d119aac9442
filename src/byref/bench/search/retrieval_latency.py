"""Encode and search latency for `byref bench search`: one query a call on one thread, lexical
and hybrid interleaved, and the memoising encoder the benchmark shares across settings."""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from typing import Any

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.page.search import Searcher


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
    from byref.discovery.hybrid.embed import HybridRanker
    from byref.discovery.lexical.index import Filters

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


