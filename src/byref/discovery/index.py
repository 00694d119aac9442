"""The search index: filters first, then field-boosted BM25 (BM25F), then the rarity re-rank.

The law (seed 001): candidates are filtered first (capability prefixes, domains, entities,
relationships; the axes intersect, values within an axis unite); query terms are deduplicated;
every matching candidate is ordered by (1) distinct query terms covered, (2) the sum of
w(t) = 1 + ln((N+1)/(df(t)+1)) over the terms it covers, where N and df count the *filtered*
candidates only, so rarity is judged within the scope of this search, (3) BM25F. A query that is
exactly a tool's name puts that tool first.

Hand-written BM25F over in-memory postings (term → {doc: precomputed contribution}): the
contribution of a term to a document does not depend on the query, so it is computed once at
build time and a search is dictionary additions plus a sort of the matching documents.
"""

from __future__ import annotations

import gc
import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from byref.discovery.ontology import capability_matches
from byref.discovery.text import ANALYZER, Analyzer, split_words
from byref.errors import Refused

if TYPE_CHECKING:
    from byref.discovery.catalog import Catalog, Entry

FIELDS = ("name", "description", "capabilities", "glossary", "parameters")
BOOSTS: Mapping[str, float] = {
    "name": 3.0, "description": 2.0, "capabilities": 2.0, "glossary": 1.0, "parameters": 0.5,
}
"""Seed 001's boosts; `parameters` (names and descriptions of top-level parameters) is ours, set
below the glossary because parameter text is generic ("id", "limit", "page") — see the note in
`byref.bench.discovery.param_boost_sweep` for the measurement."""
K1 = 2.0
"""Chosen on MetaTool dev split A (`byref.bench.retrieval.dev_splits`) over k1 0.6–2.5, b 0.3–1,
name boost 1–6 and description boost 1.5/2: lexical recall@1/@5 A 0.484/0.713 at k1 1.2 →
0.494/0.721 at 2.0, confirmed on B 0.476/0.675 → 0.481/0.677 (the hybrid moved by under 0.005 on
either). With the everyday synonym groups in, A 0.500/0.724, B 0.482/0.680. A description boost
of 1.5 was within 0.003 on A (better on B's recall@5, worse on its recall@1) and turned "show
recent commits" from git_log to git_show on the git server: the seed's 2.0 stays."""
B = 0.75
Rerank = Literal["seed", "ties", "none"]
RERANK: Rerank = "ties"
"""How seed 001's keys (coverage, then Σ w) order the matches: "seed" re-orders the first
`RERANK_DEPTH` BM25F leaders by them, "ties" lets them break equal scores only, "none" is score
order alone. Measured on two disjoint MetaTool dev splits outside the reported sample
(`byref.bench.retrieval.rerank_table`), recall@1/@5: seed 0.415/0.712 and 0.427/0.682, ties
0.486/0.712 and 0.479/0.682, none the same as ties; so ties: the BM25F order, with seed 001's
keys deciding only what BM25F cannot (its worked example still holds there)."""
RERANK_DEPTH = 5
"""Over the whole match list, coverage-first lets a tool that matches many filler words of a
long request outrank the one matching its rare word (MetaTool rows outside the reported sample:
recall@5 0.599 re-ranking every match, 0.628 BM25F alone, 0.628 re-ranking the top 5)."""
SYNONYM_WEIGHT = 0.5
"""A query word's related words (synonyms.txt) search at half their BM25F score; they are not
query terms (no coverage, no weight, no excerpt hits). Chosen on rows outside the sample:
recall@5 0.648 / 0.683 / 0.699 / 0.701 / 0.701 / 0.685 at 0 / 0.2 / 0.35 / 0.5 / 0.7 / 1."""
SYNONYMS_FILE = Path(__file__).with_name("synonyms.txt")


def read_synonyms(path: Path = SYNONYMS_FILE) -> list[str]:
    """The groups of related words in `path` (one group a line; `#` starts a comment)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return [line for line in lines if line]


class FilterError(Refused, ValueError):
    """A filter value matches no tool in the catalog; the text teaches what exists."""


@dataclass(frozen=True, slots=True)
class Filters:
    """search_tools' filters: any value within an axis, every given axis (capabilities match
    by prefix)."""

    capabilities: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    relationships: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        """True when any axis has a value."""
        return bool(self.capabilities or self.domains or self.entities or self.relationships)

    def to_json(self) -> dict[str, list[str]]:
        """The non-empty axes as lists."""
        return {k: list(v) for k, v in (
            ("capabilities", self.capabilities), ("domains", self.domains),
            ("entities", self.entities), ("relationships", self.relationships)) if v}


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

    def ranking(self, index: SearchIndex, order: Iterable[int],
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
    """The first `limit` docs by `scores` (BM25F or fused), the exact name first, seed 001's
    keys applied as `rerank` says."""
    masks, exact = scored.masks, scored.exact
    want = limit + (exact is not None)
    if rerank == "ties":
        key_of = _mask_keys(scored.terms, scored.weights, {masks.get(d, 0) for d in scores})
        leaders = heapq.nlargest(want, scores,
                                 key=lambda d: (scores[d], key_of[masks.get(d, 0)], -d))
    else:
        head = depth if rerank == "seed" else 0
        leaders = heapq.nlargest(max(want, head), scores, key=lambda d: (scores[d], -d))
        if head:
            key_of = _mask_keys(scored.terms, scored.weights,
                                {masks.get(d, 0) for d in leaders[:head]})
            leaders = sorted(leaders[:head], key=lambda d: (key_of[masks.get(d, 0)], scores[d],
                                                            -d), reverse=True) + leaders[head:]
    top = [exact] if exact is not None else []
    top.extend(d for d in leaders if d != exact)
    return top[:limit]


class SearchIndex:
    """An immutable index over one catalog version."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        boosts: Mapping[str, float] | None = None,
        k1: float = K1,
        b: float = B,
        analyzer: Analyzer = ANALYZER,
        synonyms: Iterable[str] | None = None,
        rerank: Rerank = RERANK,
        rerank_depth: int = RERANK_DEPTH,
    ) -> None:
        """`synonyms`: groups of related words, one string each (default: synonyms.txt; `()`
        for none). `rerank`: how seed 001's keys order the matches (see `RERANK`);
        `rerank_depth`: how many BM25F leaders they re-order in "seed" mode."""
        self.version = catalog.version
        self.entries: list[Entry] = list(catalog)
        self.analyzer = analyzer
        self.boosts = dict(BOOSTS if boosts is None else boosts)
        unknown = sorted(set(self.boosts) - set(FIELDS))
        if unknown:
            raise ValueError(f"Unknown field(s) {unknown!r}; fields are {list(FIELDS)!r}.")
        self.k1, self.b = k1, b
        if rerank not in ("seed", "ties", "none"):
            raise ValueError(f"Unknown rerank {rerank!r}; use 'seed', 'ties' or 'none'.")
        self.rerank: Rerank = rerank
        self.rerank_depth = rerank_depth
        self.related = self._related(read_synonyms() if synonyms is None else synonyms)
        self.postings: dict[str, dict[int, float]] = {}
        self.by_name: dict[str, int] = {}
        # Building allocates ~10⁵ small dicts and tuples that all stay alive: a cyclic GC pass
        # would only re-walk them (it doubled the build time on a warm heap when measured).
        enabled = gc.isenabled()
        gc.disable()
        try:
            self._build()
            self._tags()
        finally:
            if enabled:
                gc.enable()

    def __len__(self) -> int:
        return len(self.entries)

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
        return {
            "name": name_texts,
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
        # Parameter texts repeat across a catalog ("The ID of the project", "limit": 83,004
        # texts, 8,534 distinct at 10,000 tools), so they are analyzed once per distinct text.
        by_text: dict[str, tuple[str, ...]] = {}
        for entry in self.entries:
            texts = self.field_texts(entry)
            fields = []
            for name in active:
                if name == "parameters":
                    for text in texts[name]:
                        if text not in by_text:
                            by_text[text] = tuple(analyzer.terms_of_all((text,)))
                    terms: list[str] = [t for text in texts[name] for t in by_text[text]]
                else:
                    terms = analyzer.terms_of_all(texts[name])
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
        k1 = self.k1
        for term, docs in tilde.items():
            df = len(docs)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            self.postings[term] = {d: idf * t / (k1 + t) for d, t in docs.items()}
        for doc, entry in enumerate(self.entries):
            for key in (entry.name, entry.original_name, split_words(entry.name)):
                self.by_name.setdefault(key.lower(), doc)

    def _related(self, groups: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Term → the other terms of its groups (stemmed like everything else). A member
        written with `_` ("money_back") is a phrase: kept in `self.phrases` (its words' stems,
        stop words included → the group's single terms), never searched for itself."""
        out: dict[str, dict[str, None]] = {}
        phrases: dict[tuple[str, ...], dict[str, None]] = {}
        for group in groups:
            members = group.split()
            said = [m for m in members if "_" in m]
            terms = list(dict.fromkeys(
                t for m in members if "_" not in m for t in self.analyzer.terms(m)))
            for term in terms:
                out.setdefault(term, {}).update((t, None) for t in terms if t != term)
            for phrase in said:
                key = tuple(self.analyzer.plain_stems(phrase.replace("_", " ")))
                if len(key) > 1:
                    phrases.setdefault(key, {}).update(dict.fromkeys(terms))
        self.phrases = {key: tuple(terms) for key, terms in phrases.items() if terms}
        self.phrase_lengths = sorted({len(k) for k in self.phrases}, reverse=True)
        return {term: tuple(others) for term, others in out.items() if others}

    def related_terms(self, query: str, terms: tuple[str, ...]) -> list[str]:
        """The related words a query also searches (at `SYNONYM_WEIGHT`): its terms' group
        mates and the groups of the phrases it contains, minus its own terms."""
        related = [r for t in terms for r in self.related.get(t, ())]
        if self.phrases:
            stems = self.analyzer.plain_stems(query)
            for size in self.phrase_lengths:
                for i in range(len(stems) - size + 1):
                    related.extend(self.phrases.get(tuple(stems[i:i + size]), ()))
        own = set(terms)
        return [r for r in dict.fromkeys(related) if r not in own]

    def _tags(self) -> None:
        self.by_capability: dict[str, set[int]] = {}
        self.by_domain: dict[str, set[int]] = {}
        self.by_entity: dict[str, set[int]] = {}
        self.by_relationship: dict[str, set[int]] = {}
        for doc, entry in enumerate(self.entries):
            for axis, values in ((self.by_capability, entry.capabilities),
                                 (self.by_domain, entry.domains),
                                 (self.by_entity, entry.entities),
                                 (self.by_relationship, entry.relationships)):
                for value in values:
                    axis.setdefault(value, set()).add(doc)

    # -- filtering -----------------------------------------------------------------------------
    def candidates(self, filters: Filters | None) -> set[int] | None:
        """The docs passing every filter axis (None: no filter, every doc)."""
        if not filters:
            return None
        result: set[int] | None = None
        axes: list[tuple[str, tuple[str, ...], dict[str, set[int]], bool]] = [
            ("capability", filters.capabilities, self.by_capability, True),
            ("domain", filters.domains, self.by_domain, False),
            ("entity", filters.entities, self.by_entity, False),
            ("relationship", filters.relationships, self.by_relationship, False),
        ]
        for label, values, table, prefix in axes:
            if not values:
                continue
            docs: set[int] = set()
            for value in values:
                found = _matching(table, value, prefix)
                if not found:
                    raise FilterError(_no_such(label, value, table, prefix))
                docs |= found
            result = docs if result is None else result & docs
        return result

    # -- searching -----------------------------------------------------------------------------
    def score(self, query: str, filters: Filters | None = None) -> Scored:
        """Every matching candidate's BM25F score and covered-terms mask, and the query's terms
        and their weights within the filtered scope (the rankers order from this)."""
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
            bit = 1 << i
            if cands is None:
                df = len(posting)
                items: Iterable[tuple[int, float]] = posting.items()
            else:
                inside = posting.keys() & cands
                df = len(inside)
                items = [(d, posting[d]) for d in inside]
            weights[term] = 1.0 + math.log((n + 1) / (df + 1))
            get_score, get_mask = scores.get, masks.get
            for doc, contribution in items:
                scores[doc] = get_score(doc, 0.0) + contribution
                masks[doc] = get_mask(doc, 0) | bit
        for term in self.related_terms(query, terms):
            posting = self.postings.get(term)
            if not posting:
                continue
            get_score = scores.get
            for doc, contribution in posting.items():
                if cands is None or doc in cands:
                    scores[doc] = get_score(doc, 0.0) + SYNONYM_WEIGHT * contribution
        return Scored(terms, weights, n, cands, exact, scores, masks)

    def search(
        self, query: str, *, filters: Filters | None = None, limit: int = 10
    ) -> Ranking:
        """The lexical top `limit` within the filters (no query terms: the tools by name)."""
        scored = self.score(query, filters)
        if not scored.terms:
            return self._browse(scored.cands, scored.candidates, scored.exact, limit)
        order = arrange(scored, scored.scores, self.rerank, limit, self.rerank_depth)
        return scored.ranking(self, order, scored.scores)

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


def _mask_keys(
    terms: tuple[str, ...], weights: dict[str, float], masks: set[int]
) -> dict[int, tuple[int, float]]:
    """(coverage, Σ w) per distinct mask of covered terms: computed once per mask, not per doc."""
    out: dict[int, tuple[int, float]] = {0: (0, 0.0)}
    for mask in masks:
        covered = [t for i, t in enumerate(terms) if mask >> i & 1]
        out[mask] = (len(covered), sum(weights[t] for t in covered))
    return out


def _matching(table: dict[str, set[int]], value: str, prefix: bool) -> set[int]:
    if not prefix:
        return table.get(value, set())
    found: set[int] = set()
    for key, docs in table.items():
        if capability_matches(key, value):
            found |= docs
    return found


def _no_such(label: str, value: str, table: dict[str, set[int]], prefix: bool) -> str:
    import difflib

    known = sorted({k.split(":", 1)[0] for k in table} if prefix else set(table))
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    if not known:
        return f"No tool has a {label} {value!r}{hint}; no tool in the catalog has any {label}."
    listed = ", ".join(known[:40]) + (f", … ({len(known)} in all)" if len(known) > 40 else "")
    return f"No tool has the {label} {value!r}{hint}. Known {label} values: {listed}."
