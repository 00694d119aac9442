"""Near words: the packaged sentence model's nearest words (near_words.txt, made offline by
scripts/near_words.py) widen a lexical query at a low weight; the hybrid ranker leaves them out."""

from __future__ import annotations

import numpy as np
from helpers_discovery import make_tool

from byref.discovery import Catalog
from byref.discovery.hybrid.embed import HybridRanker
from byref.discovery.lexical.index import SearchIndex
from byref.discovery.lexical.related import (
    NEAR_KEEP,
    NEAR_WEIGHT,
    SYNONYM_WEIGHT,
    Related,
    near_table,
    read_near_words,
)
from byref.discovery.lexical.text import ANALYZER


def shop() -> Catalog:
    return Catalog([
        make_tool("order_items", "Order items from the store and pay for them."),
        make_tool("lodging_search", "Search motels and guest houses."),
        make_tool("list_apps", "List the apps of the account."),
    ])


def names(index: SearchIndex, query: str) -> list[str]:
    return [h.entry.name for h in index.search(query, limit=5).hits]


def test_a_query_word_finds_a_tool_by_its_near_word() -> None:
    near = ["hotel motel lodge"]
    index = shop().index(synonyms=(), near_words=near)
    assert names(index, "a hotel in Rome") == ["lodging_search"]
    assert names(shop().index(synonyms=(), near_words=()), "a hotel in Rome") == []


def test_a_near_word_counts_less_than_the_word_and_its_synonyms() -> None:
    cat = Catalog([make_tool("motel_rooms", "Rooms of a motel."),
                   make_tool("hotel_rooms", "Rooms of a hotel.")])
    index = cat.index(synonyms=(), near_words=["hotel motel"])
    hits = index.search("hotel", limit=2).hits
    assert [h.entry.name for h in hits] == ["hotel_rooms", "motel_rooms"]
    assert hits[1].matched == ()  # not a query term: no coverage, no excerpt hits
    assert hits[1].score < hits[0].score
    assert 0 < NEAR_WEIGHT < SYNONYM_WEIGHT < 1


def test_near_words_are_stemmed_and_only_known_ones_kept() -> None:
    table = near_table(["purchases buying purchase bought", "the of"], ANALYZER)
    assert table == {"purchas": ("buy", "bought")}  # own stem and stop words left out
    related = Related((), ANALYZER, {"car": ("vehicl", "automobil", "truck", "van")})
    assert related.near_terms(("car",), (), {"vehicl", "truck", "van"}) == ["vehicl", "truck"]
    assert len(related.near_terms(("car",), (), {"vehicl", "truck", "van"})) == NEAR_KEEP
    # The query's own terms and related words are not added again, and the next known one is.
    assert related.near_terms(("car", "truck"), ("vehicl",), {"vehicl", "truck", "van"}) == [
        "van"]


def test_the_packaged_table_reads() -> None:
    lines = read_near_words()
    assert len(lines) > 10_000
    assert all(len(line.split()) >= 2 for line in lines)
    near = SearchIndex(shop()).related.near
    assert "buy" in near[ANALYZER.stem("purchase")]


class _Fixed:
    """One fixed vector per text (the hybrid's fusion, not the model, is under test)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0] for _ in texts])


def test_the_hybrid_leaves_near_words_out() -> None:
    index = shop().index(synonyms=(), near_words=["hotel motel"])
    assert index.score("hotel").scores  # the lexical search finds the motel tool
    assert not index.score("hotel", near=False).scores
    ranker = HybridRanker(_Fixed(), vector_cache="off")
    scored, _, _ = ranker.fused(index, "hotel", None)
    assert not scored.scores


def test_packaged_near_stems_equal_the_near_words_stemmed() -> None:
    """near_stems.txt (what a first search loads) is near_words.txt as the default analyzer
    stems it: regenerate it with `write_near_stems` when the words change."""
    from byref.discovery.lexical.related import (
        NearStems,
        near_table,
        read_near_stems,
        read_near_words,
    )
    from byref.discovery.lexical.text import ANALYZER

    table = near_table(read_near_words(), ANALYZER)
    assert read_near_stems() == table
    lazy = NearStems()
    assert len(lazy) == len(table) and lazy["purchas"] == table["purchas"]
    assert dict(lazy) == table and lazy.get("not a stem") is None and "zzzqx" not in lazy


def test_packaged_synonym_stems_equal_the_synonyms_stemmed() -> None:
    """synonym_stems.txt (what a first search loads) is synonyms.txt as the default analyzer
    stems it: regenerate it with `write_synonym_stems` when the groups change."""
    from byref.discovery.lexical.related import packaged_related, read_synonym_stems, read_synonyms

    made = Related(read_synonyms(), ANALYZER)
    assert read_synonym_stems() == (made.by_term, made.phrases)
    packaged = packaged_related(ANALYZER)
    assert (packaged.by_term, packaged.phrases) == (made.by_term, made.phrases)
    # Every index with the packaged tables shares them; its own near words keep the groups.
    assert SearchIndex(shop()).related is packaged
    own = SearchIndex(shop(), near_words=["hotel motel"]).related
    assert own.by_term == made.by_term and own.near == {"hotel": ("motel",)}


def test_an_index_is_the_same_whether_its_analyzer_is_cold_or_warm() -> None:
    """A cold analyzer learns a catalog's words in one batch; what it indexes is what a warm
    one indexes (terms, contributions, names), and so is what a search finds."""
    from byref.discovery.lexical.text import Analyzer

    cold = SearchIndex(shop(), analyzer=Analyzer(), synonyms=(), near_words=())
    warm = SearchIndex(shop(), synonyms=(), near_words=())
    assert cold.postings == warm.postings and cold.by_name == warm.by_name
    assert names(cold, "order from the stores") == names(warm, "order from the stores") == [
        "order_items"]
