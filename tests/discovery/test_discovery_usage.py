"""Learning from use: transcripts give (query, tool) evidence; evidence gives a glossary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers_discovery import Script, make_tool
from hypothesis import given
from hypothesis import strategies as st

from byref.discovery import Catalog, Discovery, Searcher
from byref.discovery.declaring.usage import (
    SearchUsage,
    UsageError,
    UsageFold,
    UsageLog,
    learn_glossary,
    read_usage,
    usage_from_transcript,
)
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.tools import tool
from byref.transcript import Part, Transcript


def label_catalog() -> Catalog:
    return Catalog([
        make_tool("add_label_to_work_item", "Attach a label to a work item."),
        make_tool("define_label", "Create a label definition for the workspace."),
        make_tool("list_members", "List the members of a team."),
    ])


def test_a_word_needs_three_separate_searches() -> None:
    evidence = [SearchUsage("put a colored tag on the ticket", "add_label_to_work_item"),
                SearchUsage("colored tag for this task please", "add_label_to_work_item"),
                SearchUsage("mark the ticket with a colored sticker", "add_label_to_work_item"),
                SearchUsage("who is on the crew", "list_members")]
    learned = learn_glossary(evidence)
    # ticket and tag: two queries each. A word is written round(log2(support)) times.
    assert learned == {"add_label_to_work_item": "colored colored"}
    assert learn_glossary(evidence, min_support=2) == {
        "add_label_to_work_item": "colored colored tag ticket"}
    # The same query again is not more evidence.
    assert learn_glossary([evidence[0]] * 5) == {}


def test_learned_words_find_the_tool_and_rebuild_the_index() -> None:
    catalog = label_catalog()
    searcher = Searcher(catalog)
    # Before: no tool covers the query's own words ("tag" reaches "label" as a related word).
    assert [r.matched for r in searcher.search("colored tag").results] == [(), ()]
    before = catalog.version
    evidence = [SearchUsage(q, "add_label_to_work_item") for q in
                ("colored tag on it", "give it a colored tag", "a colored tag for the bug")]
    assert catalog.learn(learn_glossary(evidence)) == []
    assert catalog.version > before
    (top, *_) = searcher.search("colored tag").results
    assert top.name == "add_label_to_work_item"
    assert top.excerpt.startswith("Glossary: colored tag. ")  # the hit says where it came from


def test_learn_resolves_names_and_returns_the_unknown_ones() -> None:
    catalog = Catalog()
    catalog.add(make_tool("PDF_URLTool", "Read a PDF at a URL."), original_name="PDF&URLTool")
    assert catalog.learn({"pdf&urltool": "brochure", "gone_tool": "x"}) == ["gone_tool"]
    assert catalog.entry("PDF_URLTool").learned == "brochure"
    assert Searcher(catalog).search("brochure").results[0].name == "PDF_URLTool"
    catalog.learn({"PDF_URLTool": "leaflet"})  # replaces, never accumulates
    assert catalog.entry("PDF_URLTool").learned == "leaflet"


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match=r"must be ≥ 1, got 0 and 40"):
        learn_glossary([], min_support=0)


def test_usage_from_a_real_harness_session() -> None:
    discovery = Discovery(label_catalog(), budget=4)

    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return text

    model = ScriptedModel([
        call("search_tools", {"query": "colored tag"}),
        call("search_tools", {"query": "label"}),
        call("activate_tool", lambda r: {"names": [
            row["name"] for row in last_result(r)["results"]]}),
        call("activate_tool", {"names": ["list_members"]}),  # never on a page: no evidence
        call("activate_tool", {"names": ["no_such_tool"]}),  # refused: no evidence
        say("Done."),
    ])
    h = Harness(model, [note], discovery=discovery)
    h.run_sync("Tag the bug.")
    assert sorted(usage_from_transcript(h.transcript), key=lambda u: u.tool) == [
        SearchUsage("label", "add_label_to_work_item"), SearchUsage("label", "define_label")]


def test_refused_searches_and_activations_teach_nothing() -> None:
    script = Script()
    script.call("search_tools", {"query": "x"}, error=True)
    script.activate("define_label", error=True)
    assert usage_from_transcript(script.transcript) == []


def test_usage_file_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    rows = [SearchUsage("weather in Oslo", "get_forecast"),
            SearchUsage("rain tomorrow?", "get_forecast")]
    path.write_text("\n".join(json.dumps(u.to_json()) for u in rows) + "\n\n", "utf-8")
    assert read_usage(path) == rows
    path.write_text('{"query": "x"}\n', "utf-8")
    with pytest.raises(UsageError) as info:
        read_usage(path)
    assert str(info.value) == (
        f"{str(path)!r} line 1 must be an object with string fields 'query' and 'tool', e.g. "
        '{"query": "weather in Oslo", "tool": "get_forecast"}.')
    path.write_text("{oops\n", "utf-8")
    with pytest.raises(UsageError, match=r"line 1 is not JSON"):
        read_usage(path)


@given(st.lists(st.tuples(st.text(max_size=40), st.sampled_from(["a", "b", "c"])),
                max_size=40),
       st.integers(1, 4), st.integers(1, 6))
def test_learning_is_bounded_and_deterministic(
    pairs: list[tuple[str, str]], min_support: int, max_terms: int
) -> None:
    evidence = [SearchUsage(q, t) for q, t in pairs]
    learned = learn_glossary(evidence, min_support=min_support, max_terms=max_terms)
    assert learned == learn_glossary(list(reversed(evidence)), min_support=min_support,
                                     max_terms=max_terms)
    distinct = {(t, " ".join(q.lower().split())) for q, t in pairs}
    for name, text in learned.items():
        assert len(set(text.split())) <= max_terms
        # a word shown for a tool was used by at least min_support distinct queries for it
        assert sum(1 for t, _ in distinct if t == name) >= min_support


def test_discovery_learns_from_past_sessions() -> None:
    discovery = Discovery(label_catalog(), budget=4)

    @tool
    def note(text: str) -> str:
        """Keep a note."""
        return text

    transcripts = []
    for query in ("a colored label on the bug", "colored label", "pick a colored label"):
        model = ScriptedModel([
            call("search_tools", {"query": query}),
            call("activate_tool", {"names": ["add_label_to_work_item"]}),
            say("Done."),
        ])
        h = Harness(model, [note], discovery=discovery)
        h.run_sync("Tag the bug.")
        transcripts.append(h.transcript)
    search_tools = discovery.tools[0]
    assert search_tools.fn(query="colored")["results"] == []
    evidence = discovery.learn(transcripts)
    assert len(evidence) == 3
    learned = discovery.catalog.entry("add_label_to_work_item").learned
    assert learned == "colored colored label label"
    (top,) = search_tools.fn(query="colored")["results"]
    assert top["name"] == "add_label_to_work_item"


def test_the_usage_log_appends_and_survives_a_torn_last_line(tmp_path: Path) -> None:
    log = UsageLog(tmp_path / "logs" / "usage.jsonl")
    assert log.read() == []
    assert log.append([SearchUsage("rain tomorrow?", "get_forecast")]) == 1
    assert log.append([]) == 0
    with log.path.open("a", encoding="utf-8") as fh:
        fh.write('{"query": "snow on fri')  # a crash mid-append
    assert log.read() == [SearchUsage("rain tomorrow?", "get_forecast")]
    with pytest.raises(UsageError, match=r"line 2 is not JSON"):
        read_usage(log.path)  # a file given by hand is read strictly
    log.path.write_text('{"query": "a", "tool": "b"}', "utf-8")  # hand-written, no newline
    assert log.read() == [SearchUsage("a", "b")]


_CALLS = st.lists(st.tuples(
    st.sampled_from(["search_tools", "activate_tool", "note"]),
    st.sampled_from(["colored tag", "label", "  "]),
    st.lists(st.sampled_from(["define_label", "list_members", "add_label_to_work_item"]),
             max_size=2),
    st.booleans(),  # refused
    st.integers(0, 3),  # how many later calls its result waits for
), max_size=25)


@given(_CALLS)
def test_the_incremental_fold_is_the_whole_transcript_read_at_every_step(calls: Any) -> None:
    """`UsageFold.catch_up` after each message equals `usage_from_transcript` of the transcript
    so far, with results arriving late and out of order (as proxied results do)."""
    transcript = Transcript()
    transcript.append("user", [Part(type="text", value="go")])
    fold = UsageFold()
    news: list[SearchUsage] = []
    waiting: list[tuple[int, Part]] = []
    for n, (name, query, names, refused, delay) in enumerate(calls):
        args = {"query": query} if name == "search_tools" else {"names": names}
        call_id = f"c{n}"
        transcript.append("assistant", [Part(type="tool_call", tool=name, call_id=call_id,
                                             value={"name": name, "id": call_id, "input": args})])
        value = {"results": [{"name": t} for t in names]} if name == "search_tools" else "ok"
        waiting.append((delay, Part(type="tool_result", value=value, rendered="…", tool=name,
                                    call_id=call_id, is_error=refused)))
        due = [p for d, p in waiting if d == 0]
        waiting = [(d - 1, p) for d, p in waiting if d > 0]
        for part in due:
            transcript.append("tool", [part])
        news += fold.catch_up(transcript)
        assert news == fold.found == usage_from_transcript(transcript)
    for _, part in waiting:
        transcript.append("tool", [part])
    news += fold.catch_up(transcript)
    assert news == usage_from_transcript(transcript)
    assert fold.catch_up(transcript) == []  # nothing new: nothing read again
