"""Seed 001's ranking: filters first, coverage, then Σ w(t) within the filtered scope, then BM25."""

from __future__ import annotations

import math

import pytest
from helpers_discovery import make_tool

from byref.discovery import Catalog, FilterError, Filters, Ontology, Searcher
from byref.discovery.lexical.index import Rerank


def reader_catalog() -> Catalog:
    # Three file tools (the seed's scope) among others that the capability filter excludes.
    return Catalog([
        make_tool("excel_reader", "Read an Excel file", capabilities=("file:read",)),
        make_tool("text_reader", "Read a text file", capabilities=("file:read",)),
        make_tool("pdf_reader", "Read a PDF file", capabilities=("file:read",)),
        make_tool("upload_attachment", "Upload a file to a work item",
                  capabilities=("work-item:update",)),
        make_tool("export_sheet", "Export a dashboard to an Excel workbook file",
                  capabilities=("dashboard:read",)),
    ])


@pytest.mark.parametrize("rerank", ["seed", "ties"])
def test_seed_worked_example_weights_and_order(rerank: Rerank) -> None:
    # Seed 001's example holds in its own re-rank and in the default, where its keys break
    # BM25F's ties (text_reader and pdf_reader score alike).
    index = reader_catalog().index(rerank=rerank)
    ranking = index.search("Excel file", filters=Filters(("file",)))
    assert ranking.candidates == 3
    assert round(ranking.weights["excel"], 2) == 1.69
    assert round(ranking.weights["file"], 2) == 1.00
    assert math.isclose(ranking.weights["excel"], 1 + math.log(4 / 2))
    assert [h.entry.name for h in ranking.hits] == ["excel_reader", "text_reader", "pdf_reader"]
    first, second, third = ranking.hits
    assert first.matched == ("excel", "file") and round(first.weight, 2) == 2.69
    assert second.matched == third.matched == ("file",)


def test_rarity_is_computed_within_the_filtered_scope() -> None:
    # Unfiltered, "file" occurs in all five tools and "excel" in two: different weights.
    ranking = reader_catalog().index().search("Excel file")
    assert ranking.candidates == 5
    assert math.isclose(ranking.weights["excel"], 1 + math.log(6 / 3))
    assert math.isclose(ranking.weights["file"], 1.0)


def coverage_catalog() -> Catalog:
    # One rare word ("workbook") against two common ones: BM25F prefers the rare word, seed
    # 001's coverage-first key the tools covering more query terms.
    return Catalog([make_tool("convert_workbook", "Convert a workbook."),
                    *(make_tool(f"sheet_{i}", "Sheet cells.") for i in range(6))])


def test_coverage_beats_bm25_in_seed_rerank() -> None:
    hits = coverage_catalog().index(rerank="seed").search("workbook sheet cells").hits
    assert hits[0].entry.name == "sheet_0" and hits[0].matched == ("sheet", "cell")
    # seed 001 re-orders the BM25F top 5: the rare-word tool falls behind four sheet tools
    assert [h.entry.name for h in hits[:5]] == [*(f"sheet_{i}" for i in range(4)),
                                                "convert_workbook"]


def test_bm25f_order_without_the_seed_rerank() -> None:
    for rerank in ("ties", "none"):
        ranking = coverage_catalog().index(rerank=rerank).search("workbook sheet cells")
        assert ranking.hits[0].entry.name == "convert_workbook"
        scores = [h.score for h in ranking.hits]
        assert scores == sorted(scores, reverse=True)


def test_unknown_rerank_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown rerank 'best'"):
        Catalog([make_tool("a", "b")]).index(rerank="best")


def test_repeating_a_query_word_buys_nothing() -> None:
    index = reader_catalog().index()
    once = index.search("excel file")
    thrice = index.search("excel excel excel file")
    assert once.terms == thrice.terms == ("excel", "file")
    assert [h.score for h in once.hits] == [h.score for h in thrice.hits]


def test_exact_tool_name_always_ranks_first() -> None:
    catalog = Catalog([
        make_tool("read", "Read read read anything you want to read."),
        make_tool("read_json", "Read a node of a JSON document."),
    ])
    hits = catalog.index().search("read_json").hits
    assert hits[0].entry.name == "read_json" and hits[0].exact
    assert catalog.index().search("READ").hits[0].entry.name == "read"


def test_name_and_snake_case_split() -> None:
    catalog = Catalog([make_tool("add_label_to_work_item", "Attach one."),
                       make_tool("getFileContents", "Fetch bytes.")])
    assert catalog.index().search("work item label").hits[0].entry.name == (
        "add_label_to_work_item")
    assert catalog.index().search("file contents").hits[0].entry.name == "getFileContents"


def test_glossary_is_the_synonym_layer() -> None:
    ontology = Ontology(entities={"label": "A label is a colored tag shown on a work item."})
    catalog = Catalog([
        make_tool("add_label_to_work_item", "Attach a label to a work item.", entities=("label",)),
        make_tool("define_label", "Create a label definition.", entities=("label",)),
        make_tool("set_color_theme", "Change the board theme."),
    ], ontology=ontology)
    names = [h.entry.name for h in catalog.index().search("colored tag").hits]
    # Both label tools cover "colored" and "tag" (through the glossary); the theme tool only
    # "color" in its name.
    assert sorted(names[:2]) == ["add_label_to_work_item", "define_label"]
    assert names[2:] == ["set_color_theme"]


def test_relationship_tags_both_endpoints() -> None:
    catalog = Catalog()
    catalog.add(make_tool("assign_work_item", "Assign someone.", domains=("work-items",)),
                relationships=["work-item.assigned-to.member"])
    catalog.add(make_tool("list_members", "List members.", entities=("member",)))
    catalog.add(make_tool("list_boards", "List boards.", entities=("board",)))
    index = catalog.index()
    by_member = index.search("", filters=Filters(entities=("member",))).hits
    assert sorted(h.entry.name for h in by_member) == ["assign_work_item", "list_members"]
    by_rel = index.search("", filters=Filters(relationships=("work-item.assigned-to.member",)))
    assert [h.entry.name for h in by_rel.hits] == ["assign_work_item"]
    both = index.search("", filters=Filters(domains=("work-items",), entities=("member",)))
    assert [h.entry.name for h in both.hits] == ["assign_work_item"]


def test_capability_prefix_matches_whole_segments() -> None:
    catalog = Catalog([make_tool("r", capabilities=("file:read",)),
                       make_tool("w", capabilities=("file:write",)),
                       make_tool("fs", capabilities=("filesystem:read",))])
    index = catalog.index()
    assert {h.entry.name for h in index.search("", filters=Filters(("file",))).hits} == {"r", "w"}
    assert [h.entry.name for h in index.search("", filters=Filters(("file:read",))).hits] == ["r"]


def test_unknown_filter_value_teaches_what_exists() -> None:
    with pytest.raises(FilterError) as info:
        reader_catalog().index().search("x", filters=Filters(("fiel",)))
    text = str(info.value)
    assert "No tool has the capability 'fiel' (did you mean 'file'?)" in text
    assert "dashboard, file, work-item" in text


def test_parameters_are_indexed() -> None:
    schema = {"type": "object", "properties": {
        "timezone": {"type": "string", "description": "IANA zone such as Europe/Paris"}}}
    catalog = Catalog([make_tool("schedule", "Plan a meeting.", input_schema=schema),
                       make_tool("cancel", "Cancel a meeting.")])
    page = Searcher(catalog).search("timezone")
    assert [r.name for r in page.results] == ["schedule"]
    assert page.results[0].excerpt.startswith("Parameters: timezone. ")


def test_catalog_rebuilds_its_index_after_add() -> None:
    catalog = reader_catalog()
    before = catalog.index()
    catalog.add(make_tool("zip_reader", "Read a zip archive"))
    assert catalog.index() is not before
    assert catalog.index().search("zip").hits[0].entry.name == "zip_reader"
    with pytest.raises(ValueError, match="already has a tool named 'zip_reader'"):
        catalog.add(make_tool("zip_reader"))


def test_a_prepared_index_is_the_one_searches_use() -> None:
    """`Catalog.prepare` builds the index on a thread; a search meanwhile waits for that build
    rather than making its own, and one after `add` gets a new one."""
    import threading

    catalog = reader_catalog()
    thread = catalog.prepare()
    assert isinstance(thread, threading.Thread) and thread.daemon
    found = [catalog.index() for _ in range(2)]
    thread.join(30)
    assert not thread.is_alive()
    assert found[0] is found[1] is catalog.index()
    catalog.add(make_tool("zip_reader", "Read a zip archive"))
    again = catalog.prepare()
    again.join(30)
    assert catalog.index() is not found[0]
    assert catalog.index().search("zip").hits[0].entry.name == "zip_reader"


def test_a_variant_shares_the_entries_and_is_built_once() -> None:
    from byref.discovery.hybrid.embed import HYBRID_K1
    from byref.discovery.lexical.index import K1

    cat = Catalog([make_tool("git_log", "Show the commit logs."),
                   make_tool("git_show", "Show the contents of a commit.")])
    index = cat.index(synonyms=["log history"])
    assert index.k1 == K1 != HYBRID_K1
    other = index.variant(k1=HYBRID_K1)
    assert other is index.variant(k1=HYBRID_K1) and other.k1 == HYBRID_K1
    assert index.variant(k1=K1) is index
    assert len(other.entries) == len(index.entries) and other.version == index.version
    assert all(a is b for a, b in zip(other.entries, index.entries, strict=True))  # doc numbers
    assert other.boosts == index.boosts
    assert other.related.by_term == index.related.by_term  # the same synonym groups
    assert [h.doc for h in other.search("commit history").hits] == [
        h.doc for h in index.search("commit history").hits]
