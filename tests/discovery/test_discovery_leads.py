"""The hybrid's leads bench (`byref.bench.search.retrieval_leads`): its matrices are the
ranker's, so its shipped variant orders exactly as `HybridRanker.rank` does; each lead is a
score matrix of the right shape, and feedback with no weight changes nothing."""

from __future__ import annotations

import pytest
from helpers_discovery import make_tool

from byref.discovery import Catalog

np = pytest.importorskip("numpy", reason="the hybrid ranker needs numpy (byref[embeddings])")

from test_discovery_hybrid import Trigrams  # noqa: E402

from byref.bench.search.retrieval_leads import LEADS, feedback, frame, top5  # noqa: E402
from byref.discovery.hybrid.embed import HybridRanker  # noqa: E402

QUERIES = ["change the colour of a widget", "colr", "list_members", "who is on the team",
           "resize", "board"]


def catalog() -> Catalog:
    return Catalog([
        make_tool("paint_widget", "Change the colour of a widget."),
        make_tool("resize_widget", "Change the size of a widget."),
        make_tool("recolor_board", "Recolor a board."),
        make_tool("list_members", "List the members of a team."),
        make_tool("archive_board", "Archive a board nobody uses."),
        make_tool("invite_member", "Invite someone to a team."),
        make_tool("widget_stats", "How often each widget is used."),
    ])


def test_the_shipped_variant_orders_as_the_ranker_does() -> None:
    cat = catalog()
    ranker = HybridRanker(Trigrams(), vector_cache="off")
    f = frame(cat, ranker, QUERIES)
    index = cat.index()
    got = top5(f, LEADS["fused"](f))
    for row, query in enumerate(QUERIES):
        want = [h.doc for h in ranker.rank(index, query, None, 5).hits]
        assert [int(d) for d in got[row][:len(want)]] == want, query
    assert index.entries[int(got[QUERIES.index("list_members")][0])].name == "list_members"


def test_every_lead_scores_every_document_and_zero_feedback_is_the_fusion() -> None:
    cat = catalog()
    f = frame(cat, HybridRanker(Trigrams(), vector_cache="off"), QUERIES)
    for name, lead in LEADS.items():
        assert lead(f).shape == (len(QUERIES), len(cat)), name
    assert np.allclose(feedback(3, 0.0, "fused")(f), LEADS["fused"](f))
    assert not np.allclose(feedback(3, 1.0, "fused")(f), LEADS["fused"](f))
