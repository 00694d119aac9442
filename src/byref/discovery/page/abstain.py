"""Abstention: when no tool in the catalog answers a query, a page says so instead of filling up.

The law: the decision is the rankers' own evidence, never a list of topics. A hybrid ranking
abstains when the best row covers less than `MIN_COVERAGE` of the query's rarity weight
(`ranking`'s w(t); an unknown word weighs the most) and the query's vector meets the catalog
weakly (`Evidence.affinity` below `MIN_AFFINITY`), or when most of the query's weight is words
no leading tool has a word near (`wordnear`) and the affinity is below `WEAK_AFFINITY`; a
lexical ranking when most of the query's weight is words no tool's text contains and the best
row covers little of it. An exact tool name, a filter-only browse and a query of only stop words
never abstain. The query words no tool's text contains are named either way (`unmatched`), so
the model can reword before concluding the capability is missing. How the rule was chosen, and
what was tried: docs/NOTES.md#abstention.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from byref.discovery.lexical.ranking import Ranking, Similarity
from byref.discovery.lexical.text import Analyzer

MIN_COVERAGE = 0.5
"""A best row covering this share of the query's weight keeps a hybrid page (the lexical side
is confident)."""
MIN_AFFINITY = 0.345
MEAN_SHARE = 2.0
GAP_SHARE = 0.5
"""The embedding side doubts below `MIN_AFFINITY` of best + 2 × mean + 0.5 × gap (all-MiniLM-L6-v2
cosines): a query near the catalog as a whole is on its ground, and a best tool standing out is
a fit. Chosen on the first 135 needs over shares 0–6 and 0–1, and re-checked on all 340 (see the
module's note)."""
WEAK_SHARE = 0.6
WEAK_AFFINITY = 0.43
"""A hybrid page also abstains when at least `WEAK_SHARE` of the query's weight is words no
leading tool has a word near (`wordnear.WORD_NEAR`) and its affinity is below `WEAK_AFFINITY`:
the object of the need is foreign to the tools the ranking found, whatever its verb matched.
Chosen on the tuning lines over word-near cosines 0.45–0.7, shares 0.2–0.7, affinities
0.30–0.49 and the leading 3, 5 or 10 tools (see the module's note)."""
LEXICAL_UNKNOWN = 0.6
LEXICAL_COVERAGE_SHARE = 3.0
"""A lexical page abstains when unknown − 3 × the best row's coverage ≥ 0.6: most of the query's
weight is words no tool knows (nor any of their curated synonyms), and the best row covers
little of the rest. Chosen over shares 2–4 and 0.45–0.7 as the most needs abstained on the
tuning lines with at most 2% of each answerable set's tuning rows."""


def affinity(similarity: Similarity) -> float:
    """best + `MEAN_SHARE` × mean + `GAP_SHARE` × gap of a query's cosines."""
    return similarity.best + MEAN_SHARE * similarity.mean + GAP_SHARE * similarity.gap


def words_may_decide(similarity: Similarity) -> bool:
    """Whether the word-level clause could abstain at this affinity (else a ranker need not
    compute the weak share)."""
    return affinity(similarity) < WEAK_AFFINITY


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one phrasing's ranking says about whether the catalog answers it."""

    coverage: float
    """The best row's share of the query's term weight (1.0 when there are no terms)."""
    similarity: Similarity | None
    """The query's cosines to the candidates (None: lexical ranking only)."""
    exact: bool
    """The query is a tool's name."""
    unknown: float = 0.0
    """The share of the query's term weight in terms no tool's text contains."""

    @property
    def affinity(self) -> float | None:
        """best + `MEAN_SHARE` × mean + `GAP_SHARE` × gap of the cosines (None: lexical)."""
        return None if self.similarity is None else affinity(self.similarity)

    def abstains(self, min_coverage: float = MIN_COVERAGE,
                 min_affinity: float = MIN_AFFINITY,
                 lexical_unknown: float = LEXICAL_UNKNOWN) -> bool:
        """No tool answers: a hybrid ranking's two sides both doubt, or a lexical ranking's
        query is mostly words no tool knows."""
        if self.exact:
            return False
        affinity = self.affinity
        if affinity is None:
            return self.unknown - LEXICAL_COVERAGE_SHARE * self.coverage >= lexical_unknown
        weak = self.similarity is not None and self.similarity.weak >= WEAK_SHARE
        return ((self.coverage < min_coverage and affinity < min_affinity)
                or (weak and affinity < WEAK_AFFINITY))


def evidence(ranking: Ranking, vocabulary: Container[str] = ()) -> Evidence:
    """The evidence in `ranking` (its hits' covered weights, the ranker's similarities);
    `vocabulary`: the terms the catalog knows (`search` passes its postings and synonyms)."""
    total = sum(ranking.weights.values())
    exact = any(h.exact for h in ranking.hits)
    if not ranking.terms or total <= 0:
        return Evidence(1.0, ranking.similarity, exact)
    best = max((h.weight for h in ranking.hits), default=0.0)
    unknown = sum(w for t, w in ranking.weights.items() if t not in vocabulary)
    return Evidence(best / total, ranking.similarity, exact, unknown / total)


def unmatched_words(query: str, vocabulary: object, analyzer: Analyzer) -> tuple[str, ...]:
    """The query's words (as written, lower-cased, once each) none of whose terms any tool's
    text contains; stop words are never named. `vocabulary` supports `in` over terms."""
    out: dict[str, None] = {}
    for word, _, _ in analyzer.words(query):
        if word.isalpha() and word.islower():  # one sub-word: `terms` without its regexes
            stem = analyzer.stem(word)
            terms = [stem] if stem else []
        else:
            terms = analyzer.terms(word)
        if terms and not any(t in vocabulary for t in terms):  # type: ignore[operator]
            out[word.lower()] = None
    return tuple(out)
