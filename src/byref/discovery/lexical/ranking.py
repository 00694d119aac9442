"""A search's ranking: the scored matches, the coverage-then-rarity keys, and the ordered hits.

The law: every matching candidate is ordered by (1) distinct query terms covered,
(2) the sum of w(t) = 1 + ln((N+1)/(df(t)+1)) over the terms it covers, where N and df count the
*filtered* candidates only, so rarity is judged within the scope of this search, (3) BM25F; how
much of that order is applied is `RERANK` (measured: BM25F first, the keys breaking ties). A
query that is exactly a tool's name puts that tool first.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from byref.discovery.catalog.catalog import Entry


Rerank = Literal["seed", "ties", "none"]
RERANK: Rerank = "ties"
"""How the coverage-then-rarity keys (coverage, then Σ w) order the matches: "seed" re-orders the
first `RERANK_DEPTH` BM25F leaders by them, "ties" lets them break equal scores only, "none" is
score order alone. How it was chosen: docs/NOTES.md#rerank."""
RERANK_DEPTH = 5
"""How many BM25F leaders "seed" re-orders: over the whole match list, coverage-first lets a tool
matching many filler words of a long request outrank the one matching its rare word. How it was
chosen: docs/NOTES.md#rerank-depth."""


class Indexed(Protocol):
    """What a ranking needs of its index: the entries by doc number."""

    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked tool: its doc number in the index, entry, score and covered terms."""

    doc: int
    entry: Entry
    score: float
    """BM25F (the last sort key; fused score when the search was hybrid)."""
    matched: tuple[str, ...]
    """The query terms this tool covers, in query order."""
    weight: float
    exact: bool = False


@dataclass(frozen=True)
class Ranking:
    """One search's ordered hits, with the query's terms and their weights in scope."""

    terms: tuple[str, ...]
    weights: dict[str, float]
    candidates: int
    """N: how many tools passed the filters (the scope the weights were computed in)."""
    matched: int
    """How many candidates cover at least one query term."""
    hits: list[Hit] = field(default_factory=list)
    similarity: Similarity | None = None
    """How the query's vector meets the candidates' (a hybrid ranking; None: lexical)."""


@dataclass(frozen=True, slots=True)
class Similarity:
    """A query's cosines to the candidate tools, summarised (the abstention evidence)."""

    best: float
    mean: float
    gap: float
    """The best minus the `GAP_RANK`-th best (how far the best stands out)."""
    weak: float = 0.0
    """The share of the query's term weight in words no leading tool has a word near
    (`wordnear`; 0.0 where the affinity alone keeps the page, `abstain.words_may_decide`)."""


GAP_RANK = 10


@dataclass(frozen=True)
class Scored:
    """One query's lexical scoring within the filtered scope, before any ordering."""

    terms: tuple[str, ...]
    weights: dict[str, float]
    candidates: int
    cands: set[int] | None
    """The docs passing the filters (None: every doc)."""
    exact: int | None
    """The doc whose name the query is, if any (it ranks first)."""
    scores: dict[int, float]
    """BM25F of every doc that covers a query term or a related word."""
    masks: dict[int, int]
    """Bit i set: the doc covers `terms[i]`."""

    def covered(self, doc: int) -> tuple[str, ...]:
        """The query terms `doc` covers, in query order."""
        mask = self.masks.get(doc, 0)
        return tuple(t for i, t in enumerate(self.terms) if mask >> i & 1)

    def ranking(self, index: Indexed, order: Iterable[int],
                scores: Mapping[int, float]) -> Ranking:
        """Hits for `order`, each scored by `scores` (BM25F, or a fused score)."""
        hits = []
        for doc in order:
            covered = self.covered(doc)
            hits.append(Hit(doc, index.entries[doc], scores.get(doc, 0.0), covered,
                            sum(self.weights[t] for t in covered), exact=doc == self.exact))
        return Ranking(self.terms, self.weights, self.candidates, len(self.scores), hits)


def arrange(scored: Scored, scores: Mapping[int, float], rerank: Rerank, limit: int,
            depth: int = RERANK_DEPTH) -> list[int]:
    """The first `limit` docs by `scores` (BM25F or fused), the exact name first, the
    keys applied as `rerank` says."""
    masks, exact = scored.masks, scored.exact
    want = limit + (exact is not None)
    if rerank == "ties":
        pool = _contenders(scores, want)
        key_of = _mask_keys(scored.terms, scored.weights, {masks.get(d, 0) for d in pool})
        leaders = heapq.nlargest(want, pool,
                                 key=lambda d: (scores[d], key_of[masks.get(d, 0)], -d))
    else:
        head = depth if rerank == "seed" else 0
        leaders = heapq.nlargest(max(want, head), _contenders(scores, max(want, head)),
                                 key=lambda d: (scores[d], -d))
        if head:
            key_of = _mask_keys(scored.terms, scored.weights,
                                {masks.get(d, 0) for d in leaders[:head]})
            leaders = sorted(leaders[:head], key=lambda d: (key_of[masks.get(d, 0)], scores[d],
                                                            -d), reverse=True) + leaders[head:]
    top = [exact] if exact is not None else []
    top.extend(d for d in leaders if d != exact)
    return top[:limit]


def _contenders(scores: Mapping[int, float], want: int) -> Iterable[int]:
    """The docs that can be among the first `want` by score, ties at the cut included (the
    keys after the score only break ties), found without a Python key call per doc."""
    if len(scores) <= want or want <= 0:
        return scores
    cut = heapq.nlargest(want, scores.values())[-1]
    return [d for d, s in scores.items() if s >= cut]


def _mask_keys(
    terms: tuple[str, ...], weights: dict[str, float], masks: set[int]
) -> dict[int, tuple[int, float]]:
    """(coverage, Σ w) per distinct mask of covered terms: computed once per mask, not per doc."""
    out: dict[int, tuple[int, float]] = {0: (0, 0.0)}
    for mask in masks:
        covered = [t for i, t in enumerate(terms) if mask >> i & 1]
        out[mask] = (len(covered), sum(weights[t] for t in covered))
    return out


