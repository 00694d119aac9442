"""Lexical scoring: the dict path and the array path (numpy, a large index's) rank every query
alike, bit for bit, and both agree with a straightforward BM25F written from the law."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

import pytest
from helpers_discovery import make_tool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.discovery import Catalog, Searcher
from byref.discovery.lexical.index import BOOSTS, FIELDS, Filters, SearchIndex
from byref.discovery.lexical.ranking import Ranking
from byref.discovery.lexical.related import NEAR_WEIGHT, SYNONYM_WEIGHT

pytest.importorskip("numpy")

# Words with synonyms and near words in the packaged tables, plain words, and camelCase ones.
WORDS = ("delete", "remove", "erase", "file", "files", "document", "email", "mail", "send",
         "message", "create", "make", "list", "issue", "ticket", "bucket", "storage", "weather",
         "forecast", "rain", "get", "fetch", "user", "users", "repo", "repository", "github",
         "GitHub", "commit", "search", "query", "database", "table", "page", "the", "a", "of")
QUERY_WORDS = (*WORDS, "zebra", "forecasts", "deleting", "emails", "tickets")
TAGS = ("file:read", "file:write", "mail:send", "db:query", "vcs:commit")

word_lists = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)
tools = st.lists(
    st.tuples(word_lists, st.lists(st.sampled_from(WORDS), max_size=14),
              st.lists(st.sampled_from(TAGS), max_size=2, unique=True)),
    min_size=1, max_size=24)
queries = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=6).map(" ".join)


def _catalog(spec: list[tuple[list[str], list[str], list[str]]]) -> Catalog:
    made: dict[str, Any] = {}
    for i, (name, words, tags) in enumerate(spec):
        tool_name = f"{'_'.join(name)}_{i}"
        made[tool_name] = make_tool(tool_name, " ".join(words) + ".", capabilities=tuple(tags))
    return Catalog(made.values())


def _filters(spec: list[tuple[list[str], list[str], list[str]]], tag: int | None
             ) -> Filters | None:
    """A capability some tool has (the `tag`-th, cycling), or no filter."""
    present = sorted({t for _, _, tags in spec for t in tags})
    return None if tag is None or not present else Filters(
        capabilities=(present[tag % len(present)],))


def _paths(catalog: Catalog) -> tuple[SearchIndex, SearchIndex]:
    """The catalog's index twice: one scoring with dicts, one with arrays."""
    by_dicts = SearchIndex(catalog)
    by_dicts.vector_min = 10**9
    by_arrays = SearchIndex(catalog)
    by_arrays.vector_min = 0
    return by_dicts, by_arrays


def _rows(r: Ranking) -> tuple[Any, ...]:
    return (r.terms, r.weights, r.candidates, r.matched,
            [(h.doc, h.score, h.matched, h.weight, h.exact) for h in r.hits])


def _reference(index: SearchIndex, query: str, cands: set[int] | None
               ) -> tuple[dict[int, float], dict[int, tuple[str, ...]], dict[str, float]]:
    """BM25F as the index's law says, written out doc by doc: per field boost·tf over the
    length norm, summed; idf over the whole catalog; synonyms and near words at their shares;
    the rarity weights over the filtered scope."""
    analyzer, entries = index.analyzer, index.entries
    per_doc = [{f: analyzer.terms(" ".join(index.field_texts(e)[f])) if f != "parameters"
                else [t for text in index.field_texts(e)[f] for t in analyzer.terms(text)]
                for f in FIELDS} for e in entries]
    n_all = len(entries)
    avg = {f: (sum(len(d[f]) for d in per_doc) / n_all) or 1.0 for f in FIELDS}

    def contribution(term: str, doc: int) -> float:
        df = sum(any(term in d[f] for f in FIELDS) for d in per_doc)
        tilde = sum(BOOSTS[f] * per_doc[doc][f].count(term)
                    / (1 - index.b + index.b * len(per_doc[doc][f]) / avg[f]) for f in FIELDS)
        idf = math.log(1 + (n_all - df + 0.5) / (df + 0.5))
        return idf * tilde / (index.k1 + tilde)

    terms = tuple(analyzer.query_terms(query))
    related = index.related_terms(query, terms)
    near = index.related.near_terms(terms, related, index.postings)
    scope = range(n_all) if cands is None else sorted(cands)
    has = {d: {t for f in FIELDS for t in per_doc[d][f]} for d in scope}
    scores: dict[int, float] = {}
    covered: dict[int, tuple[str, ...]] = {}
    for d in scope:
        mine = [t for t in terms if t in has[d]]
        others = [(SYNONYM_WEIGHT, t) for t in related if t in has[d]] + [
            (NEAR_WEIGHT, t) for t in near if t in has[d]]
        if mine or others:
            scores[d] = (sum(contribution(t, d) for t in mine)
                         + sum(share * contribution(t, d) for share, t in others))
            covered[d] = tuple(mine)
    n = len(scope)
    weights = {t: 1 + math.log((n + 1) / (sum(t in has[d] for d in scope) + 1)) for t in terms}
    return scores, covered, weights


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tools, query=queries, tag=st.none() | st.integers(0, 9),
       limit=st.integers(1, 12))
def test_both_paths_rank_as_the_reference_does(
    spec: list[tuple[list[str], list[str], list[str]]], query: str, tag: int | None, limit: int
) -> None:
    catalog = _catalog(spec)
    by_dicts, by_arrays = _paths(catalog)
    filters = _filters(spec, tag)
    ranked = by_dicts.search(query, filters=filters, limit=limit)
    assert _rows(by_arrays.search(query, filters=filters, limit=limit)) == _rows(ranked)
    assert by_arrays._arrays is not None and by_dicts._arrays is None
    if not ranked.terms:
        return
    scores, covered, weights = _reference(by_dicts, query, by_dicts.candidates(filters))
    assert ranked.weights == pytest.approx(weights)
    assert ranked.matched == len(scores)
    tol = 1e-9
    shown = [h for h in ranked.hits if not h.exact]
    for hit in shown:
        assert hit.score == pytest.approx(scores[hit.doc], rel=tol)
        assert hit.matched == covered[hit.doc]
    for a, b in pairwise(shown):  # BM25F, then coverage, then Σw
        assert a.score >= b.score
        if a.score == b.score:
            assert (len(a.matched), a.weight) >= (len(b.matched), b.weight)
    docs = {h.doc for h in ranked.hits}
    if len(ranked.hits) < limit:  # room left: every match is shown
        assert docs >= set(scores)
    elif shown:
        assert all(s <= shown[-1].score * (1 + tol) for d, s in scores.items() if d not in docs)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tools, query=queries, also=st.lists(queries, max_size=2),
       tag=st.none() | st.integers(0, 9))
def test_both_paths_make_the_same_page(
    spec: list[tuple[list[str], list[str], list[str]]], query: str, also: list[str],
    tag: int | None
) -> None:
    catalog = _catalog(spec)
    filters = _filters(spec, tag)
    pages = []
    for vector_min in (10**9, 0):
        catalog.index().vector_min = vector_min
        catalog.index()._arrays_checked = False
        pages.append(Searcher(catalog).search(query, filters=filters, also=also))
    assert pages[0] == pages[1]


def test_a_query_longer_than_a_mask_takes_the_dict_path() -> None:
    words = [f"word{i}x" for i in range(70)]
    catalog = Catalog([make_tool("everything", " ".join(words)),
                       make_tool("half", " ".join(words[::2]))])
    by_dicts, by_arrays = _paths(catalog)
    query = " ".join(words)
    got = by_arrays.search(query, limit=2)
    assert _rows(got) == _rows(by_dicts.search(query, limit=2))
    assert [h.entry.name for h in got.hits] == ["everything", "half"]
    assert got.hits[0].matched == tuple(by_dicts.analyzer.query_terms(query))
