"""A large index's lexical scoring over arrays (numpy): the same ranking as the dict path, faster.

Owns `ArrayScoring`: per term a doc-number array and a contribution array (slices of two arrays
made from the index's `Postings` at once), a query's scores accumulated into one dense float
array and its covered-terms masks into one integer array, the contenders cut by a partition.
The law: the pages are the dict path's exactly — the same additions in the same order (a first
addition to 0.0 is exact), the same filtered document frequencies, and `ranking.arrange` itself
ordering the few contenders. Used from `VECTOR_MIN` tools up when numpy is installed (a small
catalog never imports it; a large index imports it and makes its `ArrayScoring` as it is built,
so a first search takes this path too), and for queries of at most `MAX_TERMS` terms (a mask is
one int64). Every term's arrays are made at once, vectorised, when the scoring is made.
"""

from __future__ import annotations

import math
import threading
from itertools import accumulate, chain
from typing import TYPE_CHECKING, Any

from byref.discovery.lexical.ranking import Ranking, Scored, arrange
from byref.discovery.lexical.related import NEAR_WEIGHT, SYNONYM_WEIGHT

if TYPE_CHECKING:
    from byref.discovery.lexical.filters import Filters
    from byref.discovery.lexical.index import SearchIndex

VECTOR_MIN = 2_000
"""Tools from which an index scores with arrays (below, the dict path is as fast)."""
MAX_TERMS = 62
"""Query terms an int64 mask holds (a longer query takes the dict path)."""


def numpy_or_none() -> Any:
    """The numpy module, or None when it is not installed."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


class ArrayScoring:
    """One index's postings as arrays, and the search that adds them up."""

    def __init__(self, index: SearchIndex, np: Any) -> None:
        """Every term's arrays at once (with the index build): one pass over the postings,
        the contributions computed as the dict path computes each, elementwise."""
        self._index, self._np = index, np
        self._n = len(index.entries)
        tilde, idf, k1 = index.postings.frequencies()
        sizes = [len(docs) for docs in tilde.values()]
        total = sum(sizes)
        self._docs = np.fromiter(chain.from_iterable(tilde.values()), np.int64, total)
        freqs = np.fromiter(chain.from_iterable(d.values() for d in tilde.values()),
                            np.float64, total)
        self._values = np.repeat(np.array(idf, np.float64), sizes) * freqs / (k1 + freqs)
        ends = list(accumulate(sizes))
        starts = [0, *ends[:-1]] if ends else []
        self._at = dict(zip(tilde, zip(starts, ends, strict=True), strict=True))
        self._scaled: dict[tuple[str, float], tuple[Any, Any]] = {}
        self._lock = threading.Lock()

    def _posting(self, term: str, share: float) -> tuple[Any, Any] | None:
        """`term`'s (docs, contributions × `share`) arrays, None for a word no tool has."""
        at = self._at.get(term)
        if at is None:
            return None
        start, end = at
        if share == 1.0:
            return self._docs[start:end], self._values[start:end]
        key = (term, share)
        found = self._scaled.get(key)
        if found is None:
            found = (self._docs[start:end], share * self._values[start:end])
            with self._lock:
                self._scaled[key] = found
        return found

    def search(self, query: str, terms: tuple[str, ...], filters: Filters | None,
               limit: int) -> Ranking:
        """The lexical top `limit` for a query with `terms` (at least one, at most
        `MAX_TERMS`), as `SearchIndex.search` ranks it."""
        np, index = self._np, self._index
        cands = index.candidates(filters)
        n = self._n if cands is None else len(cands)
        exact = index.by_name.get(query.strip().lower())
        if exact is not None and cands is not None and exact not in cands:
            exact = None
        inside = None
        if cands is not None:
            inside = np.zeros(self._n, np.bool_)
            if cands:
                inside[np.fromiter(cands, np.int64, len(cands))] = True
        scores = np.zeros(self._n, np.float64)
        masks = np.zeros(self._n, np.int64)
        weights: dict[str, float] = {}
        for i, term in enumerate(terms):
            posting = self._posting(term, 1.0)
            df = 0 if posting is None else (
                len(posting[0]) if inside is None else int(np.count_nonzero(inside[posting[0]])))
            if not df:
                weights[term] = 1.0 + math.log(n + 1)
                continue
            assert posting is not None
            weights[term] = 1.0 + math.log((n + 1) / (df + 1))
            docs, values = posting
            scores[docs] += values
            masks[docs] |= 1 << i
        related = index.related_terms(query, terms)
        nearby = index.related.near_terms(terms, related, index.postings)
        for share, group in ((SYNONYM_WEIGHT, related), (NEAR_WEIGHT, nearby)):
            for term in group:
                posting = self._posting(term, share)
                if posting is not None:
                    scores[posting[0]] += posting[1]
        if inside is not None:
            scores[~inside] = 0.0
            masks[~inside] = 0
        matched = np.flatnonzero(scores)
        # The contenders: every doc scoring at least the k-th best (a superset of what
        # `arrange` needs for any rerank mode), ordered by `arrange` itself.
        want = limit + 1 + index.rerank_depth
        pool = matched
        if len(matched) > want:
            values = scores[matched]
            cut = np.partition(values, len(values) - want)[len(values) - want]
            pool = matched[values >= cut]
        keep = pool.tolist()
        if exact is not None and scores[exact] and exact not in keep:
            keep.append(exact)
        top = {d: float(scores[d]) for d in keep}
        mask_of = {d: int(masks[d]) for d in keep}
        scored = Scored(terms, weights, n, cands, exact, top, mask_of)
        order = arrange(scored, top, index.rerank, limit, index.rerank_depth)
        ranking = scored.ranking(index, order, top)
        return Ranking(ranking.terms, ranking.weights, ranking.candidates, len(matched),
                       ranking.hits)
