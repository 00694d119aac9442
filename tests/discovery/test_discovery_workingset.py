"""The working set as a projection of the transcript, and byte-stable request assembly."""

from __future__ import annotations

import pytest
from helpers_discovery import Script, make_tool

from byref.discovery import Catalog, Discovery, working_set
from byref.jsonview import dumps

NAMES = ("read_pdf", "query_json", "read_json", "run_view", "search_text", "merge_pdfs",
         "generate_pdf", "list_boards")


def catalog() -> Catalog:
    return Catalog([make_tool(n, f"The {n.replace('_', ' ')} tool.",
                              capabilities=(f"{n.split('_')[-1]}:use",)) for n in NAMES])


def test_seed_timeline_t1_to_t5() -> None:
    cat = catalog()
    script = Script()

    def now() -> set[str]:
        return set(working_set(script.transcript, cat, budget=5))

    script.activate("read_pdf")                                   # t1
    assert now() == {"read_pdf"}
    script.activate("query_json", "read_json")                    # t2
    assert now() == {"read_pdf", "query_json", "read_json"}
    script.call("read_pdf", {})                                   # t3: a direct call
    assert now() == {"read_pdf", "query_json", "read_json"}
    script.activate("run_view", "search_text", "merge_pdfs")      # t4
    assert now() == {"read_pdf", "read_json", "run_view", "search_text", "merge_pdfs"}
    script.activate("generate_pdf")                               # t5
    assert now() == {"read_pdf", "run_view", "search_text", "merge_pdfs", "generate_pdf"}
    assert working_set(script.transcript, cat, budget=5)[0] == "generate_pdf"


def test_without_the_direct_call_read_pdf_would_have_fallen_off() -> None:
    cat = catalog()
    script = Script()
    script.activate("read_pdf")
    script.activate("query_json", "read_json")
    script.activate("run_view", "search_text", "merge_pdfs")
    # Least recently touched is now read_pdf itself, so it goes instead of query_json.
    assert set(working_set(script.transcript, cat, budget=5)) == {
        "query_json", "read_json", "run_view", "search_text", "merge_pdfs"}


def test_refused_activation_adds_nothing_and_unknown_names_are_ignored() -> None:
    cat = catalog()
    script = Script()
    script.activate("read_pdf", "nonexistent", error=True)
    script.call("not_in_catalog", {})
    script.call("search_tools", {"query": "pdf"})
    assert working_set(script.transcript, cat) == []


def test_replay_gives_the_same_set() -> None:
    cat = catalog()
    script = Script()
    script.activate("read_pdf", "merge_pdfs")
    script.call("read_json", {})
    first = working_set(script.transcript, cat, budget=2)
    assert first == working_set(script.transcript, cat, budget=2) == ["read_json", "merge_pdfs"]


def test_negative_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="budget must be ≥ 0"):
        working_set(Script().transcript, catalog(), budget=-1)


def test_declarations_are_sorted_byte_identical_and_the_varying_line_is_last() -> None:
    cat = catalog()
    discovery = Discovery(cat, budget=3)
    extra = make_tool("zz_always", "Always declared.")
    scaffolding = [*discovery.tools, extra]
    script = Script()

    first = discovery.declare(scaffolding, script.transcript)
    names = [d["name"] for d in first.declarations]
    assert names == ["activate_tool", "search_tools", "zz_always"]
    assert first.system_lines[-1] == "You currently have 0 of 3 activated tools loaded."
    assert first.system_lines[1] == (
        "<tool_capabilities>boards, json, pdf, pdfs, text, view</tool_capabilities>")
    assert "Never claim a capability is unavailable without searching" in first.system_lines[0]

    script.activate("run_view", "read_pdf")
    second = discovery.declare(scaffolding, script.transcript)
    assert [d["name"] for d in second.declarations] == [
        "activate_tool", "read_pdf", "run_view", "search_tools", "zz_always"]
    assert second.system_lines[-1] == "You currently have 2 of 3 activated tools loaded."
    assert second.system_lines[:-1] == first.system_lines[:-1]

    # Recency changes, membership does not: the request's tool block is byte-identical.
    script.call("read_pdf", {})
    script.call("run_view", {})
    third = discovery.declare(scaffolding, script.transcript)
    assert dumps(third.declarations) == dumps(second.declarations)
    assert third.system_lines == second.system_lines
    assert third.working_set == ("run_view", "read_pdf")


def test_scaffolding_takes_no_slot() -> None:
    cat = catalog()
    discovery = Discovery(cat, budget=1)
    script = Script()
    script.activate("read_pdf")
    script.call("activate_tool", {"names": ["activate_tool"]})
    result = discovery.declare(list(discovery.tools), script.transcript)
    assert result.working_set == ("read_pdf",)


def test_plain_declarations_when_refs_are_off() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    cat = Catalog([make_tool("read_pdf", "Read a PDF.", input_schema=schema)])
    discovery = Discovery(cat)
    script = Script()
    script.activate("read_pdf")
    plain = discovery.declare(list(discovery.tools), script.transcript, refs=False)
    assert "$ref" not in dumps(plain.declarations)
    declared = {d["name"]: dumps(d) for d in discovery.declare(
        list(discovery.tools), script.transcript).declarations}
    assert "$ref" in declared["read_pdf"]
    # The discovery scaffolding takes a few typed words: never a $ref alternative.
    assert "$ref" not in declared["search_tools"] + declared["activate_tool"]
