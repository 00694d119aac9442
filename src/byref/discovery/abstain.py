"""Abstention: when no tool in the catalog answers a query, a page says so instead of filling up.

The law: the decision is the rankers' own evidence, never a list of topics, and only a hybrid
ranking (one with a sentence model) abstains. It abstains when the best row covers less than
`MIN_COVERAGE` of the query's rarity weight (`ranking`'s w(t); an unknown word weighs the most)
and the query's vector meets the catalog weakly: best cosine + `MEAN_SHARE` × its mean cosine
to the candidates + `GAP_SHARE` × how far the best stands out from the 10th is below
`MIN_AFFINITY`. An exact tool name, a filter-only browse and a query of only stop words never
abstain. Chosen on the even lines of `bench/unanswerable_queries.txt` against the even rows of
MetaTool's sample and of the real catalog's task and vocabulary queries, as the most needs
abstained with at most 2% of each answerable set, and reported on the odd ones
(`byref.bench.abstention`): held apart, 55.9% (real catalog) and 52.4% (MetaTool) of the
needs abstained; answerable, MetaTool 1.8% of 1,000 sample rows (recall@5 0.787 → 0.778), task
1 of 32 ("how long does it take to drive from Paris to Lyon", a hit: 0.656 → 0.625),
vocabulary 0 of 67. Lexical evidence alone cannot separate them (MetaTool's long
questions cover little of their own weight: the coverage that catches a third of the needs also
empties half of MetaTool's pages), so a lexical ranking never abstains.

The query words no tool's text contains are named either way (`unmatched`), so the model can
reword before concluding the capability is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from byref.discovery.ranking import Ranking, Similarity
from byref.discovery.text import Analyzer

MIN_COVERAGE = 0.5
"""A best row covering this share of the query's weight keeps the page (the lexical side is
confident)."""
MIN_AFFINITY = 0.345
MEAN_SHARE = 2.0
GAP_SHARE = 0.5
"""The embedding side doubts below `MIN_AFFINITY` of best + 2 × mean + 0.5 × gap (all-MiniLM-L6-v2
cosines): a query near the catalog as a whole is on its ground, and a best tool standing out is a
fit; chosen over shares 0–6 and 0–1 (see the module's note)."""


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one phrasing's ranking says about whether the catalog answers it."""

    coverage: float
    """The best row's share of the query's term weight (1.0 when there are no terms)."""
    similarity: Similarity | None
    """The query's cosines to the candidates (None: lexical ranking only)."""
    exact: bool
    """The query is a tool's name."""

    @property
    def affinity(self) -> float | None:
        """best + `MEAN_SHARE` × mean + `GAP_SHARE` × gap of the cosines (None: lexical)."""
        s = self.similarity
        return None if s is None else s.best + MEAN_SHARE * s.mean + GAP_SHARE * s.gap

    def abstains(self, min_coverage: float = MIN_COVERAGE,
                 min_affinity: float = MIN_AFFINITY) -> bool:
        """No tool answers: neither ranker is confident (a lexical ranking always answers)."""
        affinity = self.affinity
        if affinity is None or self.exact or self.coverage >= min_coverage:
            return False
        return affinity < min_affinity


def evidence(ranking: Ranking) -> Evidence:
    """The evidence in `ranking` (its hits' covered weights, the ranker's similarities)."""
    total = sum(ranking.weights.values())
    exact = any(h.exact for h in ranking.hits)
    if not ranking.terms or total <= 0:
        return Evidence(1.0, ranking.similarity, exact)
    best = max((h.weight for h in ranking.hits), default=0.0)
    return Evidence(best / total, ranking.similarity, exact)


def unmatched_words(query: str, vocabulary: object, analyzer: Analyzer) -> tuple[str, ...]:
    """The query's words (as written, lower-cased, once each) none of whose terms any tool's
    text contains; stop words are never named. `vocabulary` supports `in` over terms."""
    out: dict[str, None] = {}
    for word, _, _ in analyzer.words(query):
        terms = analyzer.terms(word)
        if terms and not any(t in vocabulary for t in terms):  # type: ignore[operator]
            out[word.lower()] = None
    return tuple(out)
