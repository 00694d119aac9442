"""Abstention: a search whose evidence says no tool answers returns no rows and one line
naming the words no tool knows; answerable queries and exact names keep their rows; a lexical
search abstains when most of the query is words no tool knows; the rates on the hand-written
unanswerable needs and the answerable sets are pinned on real data (skipped without
../shared/eval).

A first-ever hybrid start in background mode answers lexically and turns hybrid when its
vectors are ready; a restart reads them from the vector cache and encodes nothing."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers_discovery import EVAL, EVAL_MISSING, make_tool
from test_discovery_hybrid import Trigrams, needs_model

from byref.discovery import Catalog, Searcher
from byref.discovery.declaring.scaffold import discovery_tools, no_fit_text
from byref.discovery.lexical.ranking import Similarity
from byref.discovery.lexical.text import ANALYZER
from byref.discovery.page.abstain import (
    MIN_AFFINITY,
    WEAK_SHARE,
    Evidence,
    evidence,
    unmatched_words,
)

pytest.importorskip("numpy", reason="the hybrid ranker needs numpy (byref[embeddings])")

from byref.discovery.hybrid.embed import HybridRanker


def dev_catalog() -> Catalog:
    return Catalog([
        make_tool("create_issue", "Create a new issue in a GitHub repository."),
        make_tool("git_log", "Show the commit history of a git repository."),
        make_tool("send_message", "Post a message to a Slack channel."),
        make_tool("run_query", "Run a read-only SQL query against the PostgreSQL database."),
        make_tool("list_buckets", "List the S3 buckets of the AWS account."),
        make_tool("get_pod_logs", "Fetch the logs of a Kubernetes pod."),
    ])


def test_unmatched_words_are_the_query_words_no_tool_contains() -> None:
    index = dev_catalog().index()
    assert unmatched_words("start the robot lawnmower for the GitHub issue",
                           index.postings, ANALYZER) == ("start", "robot", "lawnmower")


def test_the_rule_needs_both_rankers_to_doubt() -> None:
    weak = Similarity(best=0.2, mean=0.01, gap=0.05)
    strong = Similarity(best=0.6, mean=0.05, gap=0.2)
    assert Evidence(0.1, weak, exact=False).abstains()
    assert not Evidence(0.1, strong, exact=False).abstains()
    assert not Evidence(0.9, weak, exact=False).abstains()   # the lexical side is sure
    assert not Evidence(0.0, weak, exact=True).abstains()    # a tool's own name
    # a hybrid page is kept where the embedding is sure, however many words are unknown
    assert not Evidence(0.1, strong, exact=False, unknown=1.0).abstains()


def test_a_hybrid_ranking_abstains_when_most_of_the_query_is_words_no_leading_tool_is_near(
) -> None:
    # affinity 0.32 + 2 × 0.01 + 0.5 × 0.16 = 0.42: below WEAK_AFFINITY, above MIN_AFFINITY
    foreign = Similarity(best=0.32, mean=0.01, gap=0.16, weak=0.7)
    assert Evidence(0.9, foreign, exact=False).abstains()  # however much the words cover
    assert not Evidence(0.9, replace(foreign, weak=0.5), exact=False).abstains()
    assert not Evidence(0.9, replace(foreign, best=0.4), exact=False).abstains()
    assert not Evidence(0.9, foreign, exact=True).abstains()


@needs_model
def test_the_weak_share_is_the_weight_of_words_no_leading_tool_has_a_word_near() -> None:
    index = dev_catalog().index()
    ranker = HybridRanker(vector_cache="off")
    words = ranker.catalog_words(index)

    def weak(query: str) -> float:  # every word weighs 1, every tool leads
        weights = dict.fromkeys(index.analyzer.terms(query), 1.0)
        return words.weak_share(query, weights, index.analyzer, range(len(index)),
                                ranker.word_vectors)

    assert weak("water the roses in the greenhouse") == 1.0
    assert weak("show the commit history of the repository") == 0.0
    # a word written as a name is never weak: catalogs rarely list the places tools act on
    assert weak("list the buckets in Frankfurt") == 0.0
    assert weak("list the buckets of the bakery") == pytest.approx(1 / 3)
    # a ranking computes it only where the clause could decide (a low affinity)
    close = ranker.rank(index, "show the commit history of the repository", None, 5)
    assert close.similarity is not None and close.similarity.weak == 0.0
    # the verb matches a tool ("run the query"), the object no tool's word: the page abstains
    # on the word-level evidence alone (the first clause does not hold)
    page = Searcher(dev_catalog(), ranker=ranker).search("run the dishwasher on eco")
    ranking = ranker.rank(index, "run the dishwasher on eco", None, 8)
    found = evidence(ranking, index.postings)
    assert ranking.similarity is not None and ranking.similarity.weak >= WEAK_SHARE
    assert found.affinity is not None and found.affinity >= MIN_AFFINITY
    assert page.abstained and page.results == []


def test_a_lexical_ranking_abstains_on_mostly_unknown_words() -> None:
    # unknown − 3 × coverage ≥ 0.6
    assert Evidence(0.0, None, exact=False, unknown=0.65).abstains()
    assert Evidence(0.05, None, exact=False, unknown=0.8).abstains()
    assert not Evidence(0.1, None, exact=False, unknown=0.8).abstains()  # the best row covers
    assert not Evidence(0.0, None, exact=False, unknown=0.55).abstains()
    assert not Evidence(0.0, None, exact=True, unknown=1.0).abstains()


def test_a_lexical_search_names_unknown_words_and_abstains_when_they_are_most() -> None:
    searcher = Searcher(dev_catalog())
    page = searcher.search("start the robot lawnmower in the repository")
    assert page.results and not page.abstained
    assert page.unmatched == ("start", "robot", "lawnmower")
    assert page.to_json()["unmatched"] == ["start", "robot", "lawnmower"]
    empty = searcher.search("water the roses in the greenhouse")
    assert empty.abstained and empty.results == []
    assert empty.to_json() == {"query": "water the roses in the greenhouse", "results": [],
                               "unmatched": ["water", "roses", "greenhouse"], "abstained": True}
    assert not Searcher(dev_catalog(), abstain=False).search(
        "water the roses in the greenhouse").abstained
    assert searcher.search("git_log").results[0].name == "git_log"


@needs_model
def test_a_need_no_tool_answers_gets_no_rows_and_one_line() -> None:
    searcher = Searcher(dev_catalog(), ranker=HybridRanker(vector_cache="off"))
    page = searcher.search("start the robot lawnmower")
    assert page.abstained and page.results == []
    assert page.to_json() == {"query": "start the robot lawnmower", "results": [],
                              "unmatched": ["start", "robot", "lawnmower"], "abstained": True}
    kept = searcher.search("open a new issue on GitHub")
    assert not kept.abstained and kept.results[0].name == "create_issue"
    assert searcher.search("git_log").results[0].name == "git_log"
    # one phrasing the catalog answers keeps the rows
    assert searcher.search("start the robot lawnmower", also=["show commit history"]).results


@needs_model
def test_search_tools_says_what_matched_nothing_and_what_to_try() -> None:
    catalog = dev_catalog()
    search, _ = discovery_tools(Searcher(catalog, ranker=HybridRanker(vector_cache="off")))
    out = search.fn(query="water the garden")
    assert out["results"] == [] and out["unmatched"] == ["water", "garden"]
    assert out["next"] == ("No tool fits this need. No tool mentions 'water', 'garden'. "
                           "Try other words.")
    assert no_fit_text(("robot",), ["git", "slack"]) == (
        "No tool fits this need. No tool mentions 'robot'. Try other words or a capability "
        "root (git, slack).")


class Gated(Trigrams):
    """The trigram encoder, held at its first document batch until `release` is set."""

    model_id = "ef" * 32

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def encode(self, texts: Sequence[str]) -> Any:
        if len(texts) > 1:
            assert self.release.wait(30), "the test never released the encoder"
        return super().encode(texts)


def test_a_first_ever_start_answers_lexically_then_turns_hybrid(tmp_path: Path) -> None:
    encoder = Gated()
    ranker = HybridRanker(encoder, vector_cache=tmp_path, background=True)
    catalog = dev_catalog()
    searcher = Searcher(catalog, ranker=ranker)
    first = searcher.search("create issue")
    assert first.results[0].name == "create_issue"
    assert ranker.lexical_answers == 1 and not ranker.ready(catalog.index())
    encoder.release.set()
    ranker.warm(catalog.index()).join(30)
    assert ranker.ready(catalog.index())
    ranking = ranker.rank(catalog.index(), "create issue", None, 3)
    assert ranking.similarity is not None and ranker.lexical_answers == 1
    # a restart: the vectors come from the cache, nothing is encoded
    again = HybridRanker(Gated(), vector_cache=tmp_path, background=True)
    again.warm(catalog.index()).join(30)
    assert again.ready(catalog.index()) and again.encoded == 0 and again.from_disk > 0


# -- pinned rates on real data ------------------------------------------------------------------
@needs_model
@pytest.mark.skipif(not (EVAL / "metatool").is_dir() or not (EVAL / "mcp-catalog").is_dir(),
                    reason=EVAL_MISSING)
def test_abstention_rates_on_the_hand_written_needs_and_the_answerable_sets() -> None:
    """Held apart (odd lines and rows), measured: hybrid 0.718 (real catalog) and 0.697
    (MetaTool) of the 340 needs abstained (0.559 and 0.574 before the word-level clause),
    answerable MetaTool 0.028 (0.024 of all 1,000), task 0.062 (1 of 16: "how long does it take
    to drive from Paris to Lyon", a hit), vocabulary 0; recall@5 MetaTool 0.774 (0.778 before
    it, 0.787 without abstaining), task 0.625, vocabulary 0.687; lexical 0.10 and 0.535,
    answerable 0.026, 0, 0. The 60 needs written after the rule (`unanswerable_fresh.txt`):
    hybrid 0.95 and 0.767 (0.8 and 0.633 before the clause), lexical 0.2 and 0.517. The
    issue's goal, ≥ 0.8 of the needs at ≤ 0.03 answerable and recall@5 within 0.01 of the page
    before, is met on the answerable side and on the fresh needs over the real catalog only:
    these floors keep what is reached."""
    from byref.bench.search.abstention import run

    before = {"hybrid": {"metatool": 0.778, "task": 0.625, "vocabulary": 0.687},
              "lexical": {"metatool": 0.671, "task": 0.438, "vocabulary": 0.582}}
    floors = {"hybrid": (0.7, 0.67, 0.9, 0.72), "lexical": (0.05, 0.45, 0.15, 0.45)}
    for ranker in (HybridRanker(), None):
        figures = run(EVAL, ranker)
        kind = "lexical" if ranker is None else "hybrid"
        for label, floor in zip(("mcp", "metatool", "fresh_mcp", "fresh_metatool"),
                                floors[kind], strict=True):
            assert figures[f"unanswerable_{label}"]["held_apart"] >= floor, (kind, label)
        for name in ("metatool", "vocabulary"):
            m = figures[name]
            assert m["abstained"] <= 0.03 and m["held_apart"] <= 0.03
            assert m["recall@5_without"] - m["recall@5"] <= 0.015  # abstaining costs little
        for name, recall in before[kind].items():
            assert figures[name]["recall@5"] >= recall - 0.01
        assert figures["task"]["abstained"] <= 0.035  # at most the one query above
    # a restart over the 2,565 tools: every vector comes from the cache the run above filled
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    restarted = HybridRanker()
    catalog = catalog_from_listings(read_listings(EVAL / "mcp-catalog"))
    assert Searcher(catalog, ranker=restarted).search("create a github issue").results
    assert restarted.encoded == 0 and restarted.from_disk >= len(catalog)
