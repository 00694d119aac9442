"""The search index: filters first, then field-boosted BM25 (BM25F), then the rarity re-rank.

The law: candidates are filtered first (`filters`); query terms are deduplicated;
the matches are scored by BM25F and ordered as `ranking` says (the coverage and rarity
keys, applied as measured). A query that is exactly a tool's name puts that tool first.

Hand-written BM25F over in-memory postings (term → {doc: precomputed contribution}): the
contribution of a term to a document does not depend on the query, so it is computed once (when
a search first asks for the term: a build makes each term's boosted, length-normed frequencies)
and a search is dictionary additions plus a sort of the matching documents.
"""

from __future__ import annotations

import gc
import math
import threading
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from byref.discovery.lexical.arrays import MAX_TERMS, VECTOR_MIN, ArrayScoring, numpy_or_none
from byref.discovery.lexical.filters import FilterError, Filters, TagTables
from byref.discovery.lexical.ranking import (
    RERANK,
    RERANK_DEPTH,
    Hit,
    Ranking,
    Rerank,
    Scored,
    arrange,
)
from byref.discovery.lexical.related import (
    NEAR_WEIGHT,
    SYNONYM_WEIGHT,
    Related,
    near_table,
    packaged_near,
    packaged_related,
)
from byref.discovery.lexical.text import ANALYZER, Analyzer, split_words
from byref.errors import InvalidValue

if TYPE_CHECKING:
    from byref.discovery.catalog.catalog import Entry

__all__ = ["BOOSTS", "FIELDS", "RERANK", "RERANK_DEPTH", "FilterError", "Filters", "Hit",
           "Ranking", "Rerank", "Scored", "SearchIndex", "arrange"]

FIELDS = ("name", "description", "capabilities", "glossary", "parameters")
BOOSTS: Mapping[str, float] = {
    "name": 3.0, "description": 2.0, "capabilities": 2.0, "glossary": 1.0, "parameters": 0.5,
}
"""Seed 001's boosts; `parameters` (names and descriptions of top-level parameters) is ours, set
below the glossary because parameter text is generic ("id", "limit", "page") — see the note in
`byref.bench.search.discovery.param_boost_sweep` for the measurement."""
K1 = 6.0
"""BM25F's term-frequency saturation: high, since with synonyms and near words a term matched twice
should keep counting. How it was chosen: docs/NOTES.md#k1."""
B = 0.75


class Source(Protocol):
    """What an index is built from: a catalog (its version and entries) or another index's."""

    version: Any

    def __iter__(self) -> Iterator[Entry]: ...


class _Snapshot:
    """An index's own version and entries, for a variant built from it."""

    def __init__(self, version: Any, entries: list[Entry]) -> None:
        self.version, self.entries = version, entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)


class SearchIndex:
    """An immutable index over one catalog version."""

    def __init__(
        self,
        catalog: Source,
        *,
        boosts: Mapping[str, float] | None = None,
        k1: float = K1,
        b: float = B,
        analyzer: Analyzer = ANALYZER,
        synonyms: Iterable[str] | None = None,
        near_words: Iterable[str] | None = None,
        rerank: Rerank = RERANK,
        rerank_depth: int = RERANK_DEPTH,
    ) -> None:
        """`synonyms`: groups of related words, one string each (default: synonyms.txt; `()` for
        none). `near_words`: lines of a word and its near words (default: near_words.txt; `()` for
        none). `rerank`: how the coverage-then-rarity keys order the matches (see `RERANK`);
        `rerank_depth`: how many BM25F leaders they re-order in "seed" mode."""
        self.version = catalog.version
        self.entries: list[Entry] = list(catalog)
        # kept for `variant` (an iterable is read once)
        synonyms = None if synonyms is None else list(synonyms)
        near_words = None if near_words is None else list(near_words)
        self._options: dict[str, Any] = {
            "boosts": boosts, "k1": k1, "b": b, "analyzer": analyzer, "synonyms": synonyms,
            "near_words": near_words, "rerank": rerank, "rerank_depth": rerank_depth}
        self._variants: dict[tuple[tuple[str, Any], ...], SearchIndex] = {}
        self._variants_lock = threading.Lock()
        self.analyzer = analyzer
        self.boosts = dict(BOOSTS if boosts is None else boosts)
        unknown = sorted(set(self.boosts) - set(FIELDS))
        if unknown:
            raise InvalidValue(f"Unknown field(s) {unknown!r}; fields are {list(FIELDS)!r}.")
        self.k1, self.b = k1, b
        if rerank not in ("seed", "ties", "none"):
            raise InvalidValue(f"Unknown rerank {rerank!r}; use 'seed', 'ties' or 'none'.")
        self.rerank: Rerank = rerank
        self.rerank_depth = rerank_depth
        if synonyms is None:  # the packaged groups, already stemmed
            packaged = packaged_related(analyzer)
            self.related = (packaged if near_words is None
                            else packaged.with_near(near_table(near_words, analyzer)))
        else:
            self.related = Related(synonyms, analyzer, packaged_near(analyzer)
                                   if near_words is None else near_table(near_words, analyzer))
        self.postings: Postings = Postings({}, 0, k1)
        self._shares: dict[tuple[str, float], dict[int, float]] = {}
        self.vector_min = VECTOR_MIN
        """Tools from which searches score with arrays (`arrays`; tests move it)."""
        self._arrays: ArrayScoring | None = None
        self._arrays_checked = False
        self.by_name: dict[str, int] = {}
        # Building allocates ~10⁵ small dicts and tuples that all stay alive: a cyclic GC pass
        # would only re-walk them (it doubled the build time on a warm heap when measured).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._build()
            self.tags = TagTables(self.entries)
            if len(self.entries) >= self.vector_min:  # with the build, not on a first search
                self._array_scoring()
        finally:
            if enabled:
                gc.enable()

    def __len__(self) -> int:
        return len(self.entries)

    def variant(self, *, k1: float, boosts: Mapping[str, float] | None = None) -> SearchIndex:
        """This index with another k1 (and boosts: default this index's), same entries, doc
        numbers, synonyms and near words; built once and kept: the hybrid ranker's lexical side
        has its own k1."""
        boosts = dict(self.boosts if boosts is None else boosts)
        if k1 == self.k1 and boosts == self.boosts:
            return self
        key = (("k1", k1), *sorted(boosts.items()))
        with self._variants_lock:
            found = self._variants.get(key)
            if found is None:
                found = SearchIndex(_Snapshot(self.version, self.entries),
                                    **{**self._options, "k1": k1, "boosts": boosts})
                self._variants[key] = found
        return found

    # -- building ------------------------------------------------------------------------------
    def field_texts(self, entry: Entry) -> dict[str, list[str]]:
        """The texts indexed for `entry`, by field (name variants, description, tags,
        glossary, parameters)."""
        name_texts = [split_words(entry.name)]
        if entry.original_name != entry.name:
            name_texts.append(split_words(entry.original_name))
        joined = "".join(self.analyzer.subwords(entry.original_name)).lower()
        if joined not in name_texts[-1].split():
            name_texts.append(joined)  # "ResearchHelper" is also found as "researchhelper"
        tags = [*entry.capabilities, *entry.domains, *entry.entities, *entry.relationships]
        # The variants are one name written differently: each word counts once in the field
        # ("git git show", "git show" would give "show" two hits; with k1 6 that made
        # git_show outrank git_log for "show recent commits"). Neutral on MetaTool.
        name_words = " ".join(dict.fromkeys(" ".join(name_texts).split()))
        return {
            "name": [name_words],
            "description": [entry.description],
            "capabilities": [split_words(t) for t in tags],
            "glossary": entry.glossary_text(),
            "parameters": entry.parameter_text(),
        }

    def _build(self) -> None:
        analyzer = self.analyzer
        active = [f for f in FIELDS if self.boosts.get(f, 0.0) > 0.0]
        per_doc: list[list[tuple[str, Counter[str], int]]] = []
        totals = dict.fromkeys(active, 0)
        every = [self.field_texts(entry) for entry in self.entries]
        plain = [f for f in active if f != "parameters"]
        # Parameter texts repeat across a catalog ("The ID of the project", "limit": 83,004
        # texts, 8,534 distinct at 10,000 tools), so they are analyzed once per distinct text.
        distinct = (list(dict.fromkeys(t for texts in every for t in texts["parameters"]))
                    if "parameters" in active else [])
        # One batch: a cold analyzer learns the catalog's new words at once, not text by text.
        found = analyzer.terms_of_each(
            [*(texts[f] for texts in every for f in plain), *((t,) for t in distinct)])
        by_text = dict(zip(distinct, found[len(every) * len(plain):], strict=True))
        at = 0
        for texts in every:
            fields = []
            for name in active:
                if name == "parameters":
                    terms = [t for text in texts[name] for t in by_text[text]]
                else:
                    terms = found[at]
                    at += 1
                if terms:
                    totals[name] += len(terms)
                    fields.append((name, Counter(terms), len(terms)))
            per_doc.append(fields)
        n = len(self.entries)
        avg = {f: (totals[f] / n if n else 0.0) or 1.0 for f in active}
        norm = {f: (self.boosts[f], 1.0 - self.b, self.b / avg[f]) for f in active}
        # term → {doc: Σ_fields boost·tf / length-norm}; a doc's first field sets, the rest add.
        tilde: defaultdict[str, dict[int, float]] = defaultdict(dict)
        for doc, fields in enumerate(per_doc):
            first = True
            for name, counts, length in fields:
                boost, one_minus_b, b_over_avg = norm[name]
                scale = boost / (one_minus_b + b_over_avg * length)
                if first:
                    for term, tf in counts.items():
                        tilde[term][doc] = tf * scale
                    first = False
                    continue
                for term, tf in counts.items():
                    posting = tilde[term]
                    posting[doc] = posting.get(doc, 0.0) + tf * scale
        self.postings = Postings(tilde, n, self.k1)
        for doc, entry in enumerate(self.entries):
            for key in (entry.name, entry.original_name, split_words(entry.name)):
                self.by_name.setdefault(key.lower(), doc)

    def related_terms(self, query: str, terms: tuple[str, ...]) -> list[str]:
        """The related words a query also searches (at `SYNONYM_WEIGHT`): its terms' group
        mates and the groups of the phrases it contains, minus its own terms."""
        return self.related.terms(query, terms)

    def candidates(self, filters: Filters | None) -> set[int] | None:
        """The docs passing every filter axis (None: no filter, every doc)."""
        return self.tags.candidates(filters)

    # -- searching -----------------------------------------------------------------------------
    def score(self, query: str, filters: Filters | None = None, *, near: bool = True) -> Scored:
        """Every matching candidate's BM25F score and covered-terms mask, and the query's terms
        and their weights within the filtered scope (the rankers order from this). `near`:
        also search the query words' near words (`related.NEAR_WEIGHT`; the hybrid ranker,
        which has the model itself, leaves them out)."""
        cands = self.candidates(filters)
        n = len(self.entries) if cands is None else len(cands)
        terms = tuple(self.analyzer.query_terms(query))
        exact = self.by_name.get(query.strip().lower())
        if exact is not None and cands is not None and exact not in cands:
            exact = None
        scores: dict[int, float] = {}
        masks: dict[int, int] = {}
        weights: dict[str, float] = {}
        for i, term in enumerate(terms):
            posting = self.postings.get(term)
            if not posting:
                weights[term] = 1.0 + math.log(n + 1)
                continue
            if cands is not None:
                posting = {d: posting[d] for d in posting.keys() & cands}
            weights[term] = 1.0 + math.log((n + 1) / (len(posting) + 1))
            bit = 1 << i
            # Until the related words, the scored docs are the masked ones: one overlap serves
            # both sums; C-level copies for the docs new to them.
            both = scores.keys() & posting.keys()
            scores_sum = {d: scores[d] + posting[d] for d in both} if both else None
            masks_sum = {d: masks[d] | bit for d in both} if both else None
            scores.update(posting)
            masks.update(dict.fromkeys(posting, bit))
            if scores_sum and masks_sum:
                scores.update(scores_sum)
                masks.update(masks_sum)
        related = self.related_terms(query, terms)
        nearby = self.related.near_terms(terms, related, self.postings) if near else []
        for share, group in ((SYNONYM_WEIGHT, related), (NEAR_WEIGHT, nearby)):
            for term in group:
                posting = self._scaled(term, share)
                if posting and cands is not None:
                    posting = {d: posting[d] for d in posting.keys() & cands}
                if posting:
                    _add(scores, posting)
        return Scored(terms, weights, n, cands, exact, scores, masks)

    def _scaled(self, term: str, share: float) -> dict[int, float] | None:
        """`term`'s posting with every contribution times `share` (made once, then kept: the
        vocabulary bounds it)."""
        key = (term, share)
        found = self._shares.get(key)
        if found is None:
            posting = self.postings.get(term)
            if posting is None:
                return None
            found = self._shares[key] = {d: share * c for d, c in posting.items()}
        return found

    def search(
        self, query: str, *, filters: Filters | None = None, limit: int = 10
    ) -> Ranking:
        """The lexical top `limit` within the filters (no query terms: the tools by name)."""
        arrays = self._array_scoring()
        if arrays is not None:
            terms = tuple(self.analyzer.query_terms(query))
            if terms and len(terms) <= MAX_TERMS:
                return arrays.search(query, terms, filters, limit)
        scored = self.score(query, filters)
        if not scored.terms:
            return self._browse(scored.cands, scored.candidates, scored.exact, limit)
        order = arrange(scored, scored.scores, self.rerank, limit, self.rerank_depth)
        return scored.ranking(self, order, scored.scores)

    def _array_scoring(self) -> ArrayScoring | None:
        """The array path for an index of `vector_min` tools or more when numpy is installed
        (imported here, once per process: a first search never takes the slower dict path)."""
        if not self._arrays_checked:
            self._arrays_checked = True
            np = numpy_or_none() if len(self.entries) >= self.vector_min else None
            self._arrays = None if np is None else ArrayScoring(self, np)
        return self._arrays

    def _browse(self, cands: set[int] | None, n: int, exact: int | None, limit: int) -> Ranking:
        """No query text: the filtered tools by name (the exact one, if any, first)."""
        pool = range(len(self.entries)) if cands is None else cands
        ordered = sorted(pool, key=lambda d: self.entries[d].name)
        if exact is not None:
            ordered = [exact, *(d for d in ordered if d != exact)]
        hits = [Hit(d, self.entries[d], 0.0, (), 0.0, exact=d == exact) for d in ordered[:limit]]
        return Ranking((), {}, n, 0, hits)

    def field_terms(self, doc: int) -> dict[str, set[str]]:
        """The terms of each field of `doc` (for the excerpt lens; computed on demand, since
        only the shown results need it)."""
        texts = self.field_texts(self.entries[doc])
        return {f: set(self.analyzer.terms_of_all(texts[f])) for f in FIELDS}


class Postings(Mapping[str, dict[int, float]]):
    """Term → {doc: its BM25F contribution}, each made from the term's boosted, length-normed
    frequencies when first asked for (a first search pays for its own terms, not the whole
    vocabulary's), then kept."""

    def __init__(self, tilde: Mapping[str, dict[int, float]], n: int, k1: float) -> None:
        self._tilde = dict(tilde)
        self._made: dict[str, dict[int, float]] = {}
        self._n, self._k1 = n, k1
        self._lock = threading.Lock()

    def __getitem__(self, term: str) -> dict[int, float]:
        found = self._made.get(term)
        if found is not None:
            return found
        with self._lock:
            found = self._made.get(term)
            if found is None:
                docs = self._tilde[term]  # KeyError: not a term of the catalog
                df, k1 = len(docs), self._k1
                idf = math.log(1.0 + (self._n - df + 0.5) / (df + 0.5))
                found = self._made[term] = {d: idf * t / (k1 + t) for d, t in docs.items()}
        return found

    def frequencies(self) -> tuple[Mapping[str, dict[int, float]], list[float], float]:
        """Every term's boosted, length-normed frequencies by doc, each term's idf (in that
        order) and k1 (a contribution is idf · f / (k1 + f)): what `arrays` is made from."""
        n = self._n
        return self._tilde, [math.log(1.0 + (n - len(docs) + 0.5) / (len(docs) + 0.5))
                             for docs in self._tilde.values()], self._k1

    def get(self, term: str, default: Any = None) -> Any:
        """`Mapping.get` without its exception for a word no tool has (searches ask often)."""
        found = self._made.get(term)
        if found is not None:
            return found
        return self[term] if term in self._tilde else default

    def __contains__(self, term: object) -> bool:
        return term in self._tilde

    def __iter__(self) -> Iterator[str]:
        return iter(self._tilde)

    def __len__(self) -> int:
        return len(self._tilde)


def _add(scores: dict[int, float], posting: dict[int, float]) -> None:
    """`scores` += `posting`, doc by doc. Dict-level (C) copies do the work for the docs new to
    `scores`; Python arithmetic runs only where the two overlap (the same sums, in the same
    order, as a loop over every doc)."""
    both = scores.keys() & posting.keys()
    summed = {d: scores[d] + posting[d] for d in both} if both else None
    scores.update(posting)
    if summed:
        scores.update(summed)

