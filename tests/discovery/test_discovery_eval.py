"""Checks on the real 2,565-tool MCP catalog and MetaTool (skipped without ../shared/eval).

Figures and timings live in `byref bench search`; these only check behaviour on real data."""

from __future__ import annotations

import pytest
from helpers_discovery import EVAL, EVAL_MISSING

from byref.bench.search.discovery import (
    learned_catalog,
    metatool_catalog,
    metatool_data,
    ranked,
    replicate,
    score,
    surface,
    training_usage,
)
from byref.discovery import Searcher, load_catalog
from byref.discovery.catalog.mcp import catalog_from_listings, read_listings
from byref.discovery.declaring.usage import query_key

pytestmark = pytest.mark.skipif(not (EVAL / "mcp-catalog").is_dir(), reason=EVAL_MISSING)


def test_real_catalog_loads_and_searches() -> None:
    catalog = load_catalog(EVAL / "mcp-catalog")
    assert len(catalog) == 2565
    assert len(catalog.capability_roots()) == 87
    searcher = Searcher(catalog)
    assert searcher.search("create a github issue").results[0].name == "github__create_issue"
    assert searcher.search("pods_list").results[0].name == "pods_list"
    assert all(len(r.excerpt) <= 300 for r in searcher.search("list files", limit=25).results)


def test_standing_surface_is_flat_as_the_catalog_grows() -> None:
    listed = read_listings(EVAL / "mcp-catalog")
    small = surface(catalog_from_listings(listed))
    large = surface(catalog_from_listings(replicate(listed, 10_000)))
    assert large["tools"] == 10_000 and small["tools"] == 2565
    assert small["turn1_chars"] <= 8_000
    assert abs(large["turn1_chars"] - small["turn1_chars"]) <= 2
    assert large["all_declared_chars"] > 3 * small["all_declared_chars"]


@pytest.mark.skipif(not (EVAL / "metatool").is_dir(), reason=EVAL_MISSING)
def test_metatool_sample_is_the_fixed_one() -> None:
    descriptions, sample, rest = metatool_data(EVAL)
    assert len(descriptions) == 199 and len(sample) == 3000
    assert len(sample) + len(rest) == 20_614
    catalog = metatool_catalog(descriptions)
    assert catalog.entry("PDF_URLTool").original_name == "PDF&URLTool"


@pytest.mark.skipif(not (EVAL / "metatool").is_dir(), reason=EVAL_MISSING)
def test_learning_from_the_rows_outside_the_sample_lifts_recall() -> None:
    """A regression guard on a slice of the sample; `byref bench search` reports the figures."""
    descriptions, sample, rest = metatool_data(EVAL)
    usage = training_usage(sample, rest)
    asked = {query_key(r["Query"]) for r in sample}
    assert not asked & {query_key(u.query) for u in usage}
    rows = sample[:600]
    zero_shot = score(ranked(Searcher(metatool_catalog(descriptions))), rows)
    learned = score(ranked(Searcher(learned_catalog(descriptions, usage))), rows)
    assert learned["recall@5"] >= 0.72 > zero_shot["recall@5"]
    assert learned["recall@1"] > zero_shot["recall@1"] + 0.1


@pytest.mark.skipif(not (EVAL / "metatool").is_dir(), reason=EVAL_MISSING)
def test_dev_splits_are_disjoint_and_never_ask_a_sample_query() -> None:
    from byref.bench.search.retrieval import dev_splits

    _, sample, rest = metatool_data(EVAL)
    a, b = dev_splits(sample, rest)
    assert len(a) == len(b) == 2000
    assert not {id(r) for r in a} & {id(r) for r in b}
    asked = {query_key(r["Query"]) for r in sample}
    assert not asked & {query_key(r["Query"]) for r in a + b}
    assert dev_splits(sample, rest) == (a, b)  # seeded: the same rows every run


def test_task_queries_name_real_tools_and_lexical_search_runs_on_them() -> None:
    from byref.bench.search.retrieval import read_task_queries, task_queries

    queries = read_task_queries()
    assert len(queries) >= 30 and all(tools for _, tools in queries)
    figures = task_queries(EVAL, None)  # raises if a named tool is not in the catalog
    assert figures["queries"] == len(queries) and "hybrid" not in figures
    assert 0.0 <= figures["lexical"]["recall@1"] <= figures["lexical"]["recall@5"] <= 1.0


@pytest.mark.skipif(not (EVAL / "mcp-catalog").is_dir(), reason=EVAL_MISSING)
def test_vocabulary_queries_have_phrasings_and_fusing_them_runs() -> None:
    from byref.bench.search.retrieval import (
        VOCABULARY_QUERIES,
        read_phrasings,
        read_task_queries,
        task_queries,
    )

    queries = read_task_queries(VOCABULARY_QUERIES)
    assert len(queries) >= 60 and all(tools for _, tools in queries)
    also = read_phrasings()
    assert set(also) == {q for q, _ in queries} and all(also.values())
    figures = task_queries(EVAL, None, VOCABULARY_QUERIES)  # raises on an unknown tool name
    assert set(figures) == {"queries", "lexical", "lexical_without_near_words",
                            "lexical_without_synonyms", "lexical_also"}
    assert figures["lexical_also"]["recall@5"] >= figures["lexical"]["recall@5"]


def test_the_engines_beside_byref_search_the_same_catalog_and_report_ratios() -> None:
    pytest.importorskip("bm25s", reason="byref[bench] (bm25s, tantivy) is not installed")
    pytest.importorskip("tantivy", reason="byref[bench] (bm25s, tantivy) is not installed")
    from byref.bench.search.search_baselines import baseline_latency

    catalog = catalog_from_listings(read_listings(EVAL / "mcp-catalog")[:300])
    found = baseline_latency(catalog, ("create a github issue", "list s3 buckets", "read a file"),
                             rounds=2)
    assert found["tools"] == 300 and found["searches"] == 6
    for name in ("byref_search", "byref_ranking", "bm25s", "bm25s_scores", "tantivy"):
        assert 0 < found[name]["p50_ms"] <= found[name]["p95_ms"], name
    assert found["byref_ranking_over_tantivy_p50"] == round(
        found["byref_ranking"]["p50_ms"] / found["tantivy"]["p50_ms"], 2)


def test_the_lexical_ranking_on_ten_thousand_tools_is_every_match_ordered() -> None:
    # The index adds postings dict by dict; the page must be what summing doc by doc and
    # sorting every match by (score, coverage keys, doc) gives, filtered and not.
    from byref.discovery.lexical.index import Filters
    from byref.discovery.lexical.ranking import _mask_keys

    catalog = catalog_from_listings(replicate(read_listings(EVAL / "mcp-catalog"), 10_000))
    index = catalog.index()
    roots = catalog.capability_roots()
    for i, query in enumerate(("create a github issue", "read a file", "list s3 buckets",
                               "take a screenshot of the browser page")):
        for filters in (None, Filters(capabilities=(roots[i],))):
            cands = index.candidates(filters)
            terms = tuple(index.analyzer.query_terms(query))
            scores: dict[int, float] = {}
            masks: dict[int, int] = {}
            for bit, term in enumerate(terms):
                for doc, c in index.postings.get(term, {}).items():
                    if cands is None or doc in cands:
                        scores[doc] = scores.get(doc, 0.0) + c
                        masks[doc] = masks.get(doc, 0) | 1 << bit
            scored = index.score(query, filters)
            assert scored.masks == masks
            assert set(scores) <= set(scored.scores)
            keys = _mask_keys(terms, scored.weights, set(masks.values()))
            every = sorted(scored.scores, key=lambda d: (
                scored.scores[d], keys[scored.masks.get(d, 0)], -d), reverse=True)
            got = [h.doc for h in index.search(query, filters=filters, limit=10).hits]
            exact = scored.exact
            assert got == ([exact] if exact is not None else []) + [
                d for d in every if d != exact][:10 - (exact is not None)]


def test_the_array_path_makes_the_dict_paths_pages_on_the_real_catalog() -> None:
    # A large index scores with arrays (`discovery.lexical.arrays`); every page must be the dict
    # path's: rows, scores, excerpts, matched and unmatched words, abstentions.
    from byref.bench.search.discovery import LATENCY_QUERIES
    from byref.discovery.lexical.index import Filters

    pytest.importorskip("numpy")
    catalog = load_catalog(EVAL / "mcp-catalog")
    index = catalog.index()
    roots = catalog.capability_roots()
    _, sample, _ = metatool_data(EVAL)
    plan = [(q, f) for i, q in enumerate([*LATENCY_QUERIES, *(r["Query"] for r in sample[:60])])
            for f in (None, Filters(capabilities=(roots[i % len(roots)],)))]
    pages = []
    for vector_min in (10**9, 0):
        index.vector_min, index._arrays_checked = vector_min, False
        searcher = Searcher(catalog)
        pages.append([searcher.search(q, filters=f) for q, f in plan])
    assert index._arrays is not None
    assert pages[0] == pages[1]
    assert sum(bool(p.results) for p in pages[1]) > len(plan) // 2


def test_rounds_against_the_engines_report_each_round_and_the_spread_of_each_ratio() -> None:
    pytest.importorskip("bm25s", reason="byref[bench] (bm25s, tantivy) is not installed")
    pytest.importorskip("tantivy", reason="byref[bench] (bm25s, tantivy) is not installed")
    from byref.bench.search.search_baselines import baseline_rounds

    catalog = catalog_from_listings(read_listings(EVAL / "mcp-catalog")[:200])
    found = baseline_rounds(catalog, ("create a github issue", "read a file"), rounds=3)
    assert found["tools"] == 200 and len(found["rounds"]) == 3
    spread = found["ratios"]["byref_search_over_bm25s_p50"]
    each = sorted(r["byref_search_over_bm25s_p50"] for r in found["rounds"])
    assert (spread["min"], spread["median"], spread["max"]) == (each[0], each[1], each[2])
    assert set(found["ratios"]) == {f"{a}_over_{b}{c}_p50"
                                    for a in ("byref_search", "byref_ranking")
                                    for b in ("bm25s", "bm25s_scores", "tantivy")
                                    for c in ("", "_cpu")}
    assert all(r[name]["cpu_p50_ms"] >= 0 for r in found["rounds"]
               for name in ("byref_search", "bm25s", "tantivy"))


def test_the_first_search_bench_searches_the_catalog_it_was_asked_for() -> None:
    """The first-search bench's library and gateway sides (in this process here; the bench
    runs each in a new one) answer and time a first and warm searches over `size` tools, grown
    past the catalog by renamed copies."""
    from byref.bench.search.lexical_first import _listings, gateway, library

    grown = _listings(EVAL / "mcp-catalog", 2_600)
    names = [(server, t["name"]) for server, tools in grown.items() for t in tools]
    assert len(names) == len(set(names)) == 2_600
    assert sum(name.endswith("_r1") for _, name in names) == 35
    for side in (library, gateway):
        found = side(EVAL, 60)
        assert set(found) == {"first_ms", "first_cpu_ms", "warm_p50_ms"}, side
        assert found["first_ms"] > 0 and found["warm_p50_ms"] > 0
