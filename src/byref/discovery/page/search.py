"""A search page: ranked catalog tools, each with an excerpt, within one page budget.

The law: a page is a menu, never a declaration; its rows carry names, tags and excerpts, and the
excerpts of one page share a budget water-filled across the rows (the lens). Ranking is the index's
(lexical, the coverage-then-rarity keys) or, when a hybrid ranker is given, that ranking fused with
embedding similarity; an exact tool name is first either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from byref.discovery.lexical.index import Filters, Hit, Ranking, SearchIndex
from byref.discovery.page.abstain import evidence, unmatched_words
from byref.discovery.page.excerpts import EXCERPT_MAX, PAGE_CHARS, excerpt, water_fill
from byref.discovery.page.texts import Fields, PageTexts, page_texts

if TYPE_CHECKING:
    from byref.discovery.catalog.catalog import Catalog

DEFAULT_LIMIT = 8
MAX_ALSO = 4
"""Other phrasings a search fuses at most (search_tools' `also`)."""
ALSO_DEPTH = 3
"""Each phrasing is ranked to `ALSO_DEPTH` × the page's rows before fusing, so a tool that two
phrasings find just below their own pages can still make the fused one."""


class Ranker(Protocol):
    """Reorders a lexical ranking (the hybrid ranker implements this)."""

    def rank(self, index: SearchIndex, query: str, filters: Filters | None,
             limit: int) -> Ranking:
        """The top `limit` hits for `query` within `filters`."""
        ...


@dataclass(frozen=True, slots=True)
class Result:
    """One row of a search_tools page: catalog name, server, server's name, score, excerpt."""

    name: str
    server: str | None
    tool: str
    """The name the tool's server lists it under."""
    score: float
    excerpt: str
    capabilities: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    matched: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The CLI's row: server, tool, name, score, excerpt."""
        return {"server": self.server, "tool": self.tool, "name": self.name,
                "score": round(self.score, 4), "excerpt": self.excerpt}

    def menu_row(self) -> dict[str, Any]:
        """What the model sees of a found tool: enough to choose, nothing declared."""
        row: dict[str, Any] = {"name": self.name, "description": self.excerpt}
        if self.capabilities:
            row["capabilities"] = list(self.capabilities)
        if self.domains:
            row["domains"] = list(self.domains)
        return row


@dataclass(frozen=True)
class Page:
    """One search_tools answer: the query, filters, scope sizes and rows."""

    query: str
    filters: Filters
    candidates: int
    matched: int
    results: list[Result] = field(default_factory=list)
    unmatched: tuple[str, ...] = ()
    """The query words no tool's text contains."""
    abstained: bool = False
    """No tool answers the query (`abstain`): the page has no rows."""

    def to_json(self) -> dict[str, Any]:
        """The CLI's page: the query, the rows, the words that matched nothing."""
        out: dict[str, Any] = {"query": self.query,
                               "results": [r.to_json() for r in self.results]}
        if self.unmatched:
            out["unmatched"] = list(self.unmatched)
        if self.abstained:
            out["abstained"] = True
        return out


class Searcher:
    """Searches one catalog (its index is rebuilt when the catalog changes)."""

    def __init__(
        self, catalog: Catalog, *, ranker: Ranker | None = None, page_chars: int = PAGE_CHARS,
        abstain: bool = True,
    ) -> None:
        """`abstain`: answer no rows when no tool fits the query (`abstain.Evidence`)."""
        self.catalog = catalog
        self.ranker = ranker
        self.page_chars = page_chars
        self.abstain = abstain

    @property
    def index(self) -> SearchIndex:
        """The catalog's current index (rebuilt when the catalog changed)."""
        return self.catalog.index()

    def search(
        self, query: str = "", *, filters: Filters | None = None, limit: int = DEFAULT_LIMIT,
        also: Sequence[str] = (),
    ) -> Page:
        """One page of results: the ranker's order (lexical without one or without query text),
        at least one row asked for, excerpts sharing `page_chars`. `also`: other phrasings of
        the same need (the model's synonyms), fused with `query` (`fuse_phrasings`)."""
        index = self.index
        limit = max(1, limit)
        phrasings = [q for q in dict.fromkeys((query, *also)) if q.strip()][:1 + MAX_ALSO]
        if len(phrasings) > 1:
            each = [self._rank(index, q, filters, limit * ALSO_DEPTH) for q in phrasings]
            ranking = fuse_phrasings(each, limit)
        else:
            each = [self._rank(index, phrasings[0] if phrasings else query, filters, limit)]
            ranking = each[0]
        unmatched = tuple(dict.fromkeys(
            w for q in phrasings for w in unmatched_words(q, index.postings, index.analyzer)))
        # every phrasing must doubt: one the catalog answers is enough to keep the rows; a
        # query no tool matches at all abstains too (unless filters emptied the scope)
        abstained = self.abstain and bool(phrasings) and (
            all(evidence(r, _Known(index)).abstains() for r in each) if ranking.hits
            else not filters and bool(ranking.terms))
        results = [] if abstained else render_results(index, ranking, self.page_chars)
        return Page(query, filters or Filters(), ranking.candidates, ranking.matched, results,
                    unmatched, abstained)

    def _rank(self, index: SearchIndex, query: str, filters: Filters | None,
              limit: int) -> Ranking:
        if self.ranker is not None and query.strip():
            return self.ranker.rank(index, query, filters, limit)
        return index.search(query, filters=filters, limit=limit)


class _Known:
    """The terms a tool's text contains, or one of whose synonyms (the curated groups) it
    does: a query word the synonym table carries to a tool is not unknown to the catalog."""

    def __init__(self, index: SearchIndex) -> None:
        self._postings = index.postings
        self._mates = index.related.by_term

    def __contains__(self, term: object) -> bool:
        postings = self._postings
        return term in postings or any(m in postings for m in self._mates.get(str(term), ()))


def fuse_phrasings(rankings: Sequence[Ranking], limit: int) -> Ranking:
    """One ranking from several phrasings of one need: each phrasing's scores divided by its
    best, summed over the phrasings (a tool found by several ranks above one found by one),
    an exact name in any phrasing first; the terms, weights and matched words are the union."""
    total: dict[int, float] = {}
    first: dict[int, Hit] = {}
    matched: dict[int, dict[str, None]] = {}
    exact: list[int] = []
    for ranking in rankings:
        top = max((h.score for h in ranking.hits), default=0.0)
        for hit in ranking.hits:
            share = hit.score / top if top > 0 else 0.0
            total[hit.doc] = total.get(hit.doc, 0.0) + share
            first.setdefault(hit.doc, hit)
            matched.setdefault(hit.doc, {}).update(dict.fromkeys(hit.matched))
            if hit.exact and hit.doc not in exact:
                exact.append(hit.doc)
    order = exact + sorted((d for d in total if d not in exact),
                           key=lambda d: (-total[d], d))
    terms = tuple(dict.fromkeys(t for r in rankings for t in r.terms))
    weights: dict[str, float] = {}
    for ranking in rankings:
        for term, weight in ranking.weights.items():
            weights[term] = max(weight, weights.get(term, 0.0))
    hits = [replace(first[d], score=total[d], matched=tuple(matched[d])) for d in order[:limit]]
    return Ranking(terms, weights, rankings[0].candidates,
                   max(r.matched for r in rankings), hits, rankings[0].similarity)


def render_results(index: SearchIndex, ranking: Ranking, page_chars: int) -> list[Result]:
    """Rows with water-filled excerpts for the hits of a ranking."""
    texts = page_texts(index)
    pages = [texts.of(h.doc) for h in ranking.hits]
    spans = [p.hits(h.matched) if h.matched else []
             for p, h in zip(pages, ranking.hits, strict=True)]
    prefixes = [_prefix(texts, h, {s.term for s in found})
                for h, found in zip(ranking.hits, spans, strict=True)]
    demands = [min(EXCERPT_MAX, len(p) + len(t.text))
               for p, t in zip(prefixes, pages, strict=True)]
    budgets = water_fill(demands, page_chars)
    out = []
    for hit, page, found, prefix, budget in zip(ranking.hits, pages, spans, prefixes, budgets,
                                                strict=True):
        room = budget - len(prefix)
        body = excerpt(page.text, hit.matched, ranking.weights, room, analyzer=index.analyzer,
                       hits=found) if room > 0 else ""
        shown = (prefix + body) if body else prefix.rstrip()
        entry = hit.entry
        out.append(Result(entry.name, entry.server, entry.original_name, hit.score,
                          shown[:EXCERPT_MAX], entry.capabilities, entry.domains, hit.matched))
    return out


def _prefix(texts: PageTexts, hit: Hit, in_description: set[str]) -> str:
    """"Tool name: archive work item. " for query terms the description does not contain."""
    missing = [t for t in hit.matched if t not in in_description]
    if not missing:
        return ""
    fields = texts.fields(hit.doc)
    pieces: list[str] = []
    for field_name, label, present in fields.present:
        found = [t for t in missing if t in present]
        if not found:
            continue
        missing = [t for t in missing if t not in found]
        pieces.append(f"{label}: {_snippet(field_name, fields, found, texts)}")
        if not missing:
            break
    return "".join(p + ". " for p in pieces)


def _snippet(field_name: str, fields: Fields, found: list[str], texts: PageTexts) -> str:
    wanted = set(found)
    if field_name == "name":
        return fields.name
    if field_name == "capabilities":
        return ", ".join(t for t, terms in fields.tags if wanted & terms)
    if field_name == "parameters":
        return ", ".join([p for p, terms in fields.parameters if not wanted.isdisjoint(terms)][:6])
    weights: Mapping[str, float] = {}
    return excerpt(fields.glossary, found, weights, 100, analyzer=texts.analyzer)
