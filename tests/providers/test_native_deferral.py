"""Native deferral: the catalog declared deferred, byref's search loading tools by reference."""

from __future__ import annotations

from typing import Any

import pytest

from byref.harness import Harness
from byref.harness.providers import (
    NativeDeferral,
    discovery_search,
    model_from_id,
    native_search_tool,
)
from byref.harness.providers.deferral import SEARCH_DESCRIPTION, recorded_names
from byref.testing import result_text
from byref.tools import Tool, tool
from doubles.wire import (
    A_MODEL,
    Wire,
    a_json,
    a_message,
    a_text,
    a_tool_use,
    a_turn,
    o_call,
    o_json,
    o_outputs,
    o_response,
    o_search_call,
    o_text,
)

EPHEMERAL = {"type": "ephemeral"}


@tool
def make_report(title: str, rows: list[dict[str, Any]]) -> str:
    """Render rows as a PDF report."""
    return f"{title}: {len(rows)} rows"


@tool
def archive_item(item_id: str) -> str:
    """Archive one work item."""
    return f"archived {item_id}"


@tool
def export_items(project: str) -> str:
    """Export a project's work items."""
    return project


def search(query: str) -> list[str]:
    # Stale and already-loaded names included on purpose: the adapter must drop them.
    return {"pdf report": ["make_report", "gone_tool", "search_tools", "make_report"],
            "nothing": []}.get(query, [])


def catalog() -> list[Tool]:
    return [native_search_tool(search), make_report, archive_item, export_items]


def anthropic_play(query: str) -> Any:
    def play(body: dict[str, Any]) -> Any:
        turn = a_turn(body)
        if turn == 0:
            return a_json(a_message(a_tool_use("search_tools", {"query": query}, id="toolu_s")))
        if turn == 1:
            return a_json(a_message(a_tool_use("make_report", {"title": "T", "rows": [{}]})))
        return a_json(a_message(a_text("Done.")))

    return play


def test_anthropic_search_results_travel_as_tool_reference_blocks() -> None:
    wire = Wire(anthropic_play("pdf report"))
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral())
    run = Harness(m, catalog(), system="Be brief.").run_sync("Make the report.")
    assert run.text == "Done." and [c.name for c in run.calls] == ["search_tools", "make_report"]
    tools = wire.bodies[0]["tools"]
    assert all(b["tools"] == tools for b in wire.bodies)  # activation changed no declaration
    flags = {t["name"]: t.get("defer_loading") for t in tools}
    assert flags.pop("search_tools") is None
    assert set(flags.values()) == {True} and {"make_report", "archive_item"} <= set(flags)
    reference = {"type": "tool_result", "tool_use_id": "toolu_s",
                 "content": [{"type": "tool_reference", "tool_name": "make_report"}]}
    assert wire.bodies[1]["messages"][-1]["content"] == [{**reference, "cache_control": EPHEMERAL}]
    assert wire.bodies[2]["messages"][2]["content"] == [reference]  # byte-stable once rendered
    # What the transcript keeps is byref's own record; the native form exists only on the wire.
    assert recorded_names(result_text(list(run.transcript)[2].parts[0])) == [
        "make_report", "gone_tool", "search_tools"]


def test_anthropic_search_that_loads_nothing_says_so_in_text() -> None:
    wire = Wire(anthropic_play("nothing"))
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral(), cache=False)
    Harness(m, catalog()).run_sync("Make the report.")
    result = wire.bodies[1]["messages"][-1]["content"][0]
    assert result["content"] == '{"query":"nothing","tools":[]}'


def test_openai_search_results_travel_as_tool_search_output() -> None:
    def play(body: dict[str, Any]) -> Any:
        turn = o_outputs(body)
        if turn == 0:
            return o_json(o_response(o_search_call({"query": "pdf report"}, call_id="call_s")))
        if turn == 1:
            return o_json(o_response(o_call("make_report", {"title": "T", "rows": [{}]})))
        return o_json(o_response(o_text("Done.")))

    wire = Wire(play)
    m = model_from_id("openai:gpt-5", api_key="test", http_client=wire.client(), max_retries=0,
                      deferral=NativeDeferral())
    run = Harness(m, catalog(), system="Be brief.").run_sync("Make the report.")
    assert run.text == "Done." and [c.name for c in run.calls] == ["search_tools", "make_report"]
    tools = wire.bodies[0]["tools"]
    assert all(b["tools"] == tools for b in wire.bodies)
    assert len({b["prompt_cache_key"] for b in wire.bodies}) == 1
    by_name = {t.get("name", t["type"]): t for t in tools}
    search_decl = by_name.pop("tool_search")
    assert search_decl["execution"] == "client"
    assert search_decl["description"] == SEARCH_DESCRIPTION
    assert set(search_decl["parameters"]["properties"]) == {"query"}
    assert {t["defer_loading"] for t in by_name.values()} == {True}
    assert wire.bodies[1]["input"][1:] == [
        {"type": "tool_search_call", "call_id": "call_s", "execution": "client",
         "status": "completed", "arguments": {"query": "pdf report"}},
        {"type": "tool_search_output", "call_id": "call_s", "execution": "client",
         "status": "completed", "tools": [by_name["make_report"]]},
    ]


def test_native_mode_without_the_search_tool_is_a_clear_error() -> None:
    wire = Wire(anthropic_play("pdf report"))
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral(search_tool="find"))
    with pytest.raises(ValueError, match=(
            r"^Native deferral needs the search tool 'find' among the declared tools; add "
            r"native_search_tool\(search\) to the harness's tools\.$")):
        Harness(m, [make_report]).run_sync("go")
    assert wire.raw == []
    with pytest.raises(ValueError, match=r"^A search limit must be at least 1, got 0\.$"):
        native_search_tool(search, limit=0)


def test_always_loaded_tools_are_declared_normally() -> None:
    wire = Wire(anthropic_play("pdf report"))
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral(
                          always_loaded=frozenset({"export_items"})))
    Harness(m, catalog()).run_sync("go")
    flags = {t["name"]: t.get("defer_loading") for t in wire.bodies[0]["tools"]}
    assert flags["export_items"] is None and flags["make_report"] is True


def test_byref_discovery_drives_native_mode() -> None:
    from byref.discovery import Catalog

    tools = [make_report, archive_item, export_items]
    search_with_byref = discovery_search(Catalog(tools), limit=2)
    assert search_with_byref("render a pdf report")[0] == "make_report"
    assert search_with_byref("archive_item")[0] == "archive_item"  # an exact name wins
    wire = Wire(anthropic_play("pdf report"))
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral(), cache=False)
    Harness(m, [native_search_tool(search_with_byref), *tools]).run_sync("Make the report.")
    content = wire.bodies[1]["messages"][-1]["content"][0]["content"]
    assert content[0] == {"type": "tool_reference", "tool_name": "make_report"}


def test_byref_discovery_takes_the_models_other_phrasings() -> None:
    from byref.discovery import Catalog

    search = native_search_tool(discovery_search(Catalog([make_report, archive_item,
                                                          export_items]), limit=2))
    assert "also" in search.input_schema["properties"]
    assert search.description.endswith(
        " `also`: other phrasings of the same need, fused ('money back' → refund).")
    assert search.fn(query="shelve it") == {"query": "shelve it", "tools": []}
    assert search.fn(query="shelve it", also=["archive one item", " "]) == {
        "query": "shelve it", "tools": ["archive_item", "export_items"],
        "also": ["archive one item"]}


def test_a_query_only_engine_is_declared_without_also() -> None:
    asked: list[str] = []
    search = native_search_tool(lambda q: asked.append(q) or ["note"])
    assert set(search.input_schema["properties"]) == {"query"}
    assert search.description == SEARCH_DESCRIPTION
    assert search.fn(query="notes") == {"query": "notes", "tools": ["note"]} and asked == ["notes"]
