"""search_tools and activate_tool: a menu that declares nothing; names validated; events."""

from __future__ import annotations

import pytest
from helpers_discovery import make_tool

from byref.discovery import Catalog, Discovery
from byref.events import Emitter, MemorySink
from byref.tools import ToolInputError


def setup() -> tuple[Discovery, MemorySink]:
    catalog = Catalog([
        make_tool("read_pdf", "Read the text of a PDF document.", capabilities=("file:read",)),
        make_tool("merge_pdfs", "Merge several PDF documents into one.",
                  capabilities=("file:write",)),
        make_tool("list_boards", "List the boards of a workspace.",
                  capabilities=("board:read",)),
    ])
    sink = MemorySink()
    return Discovery(catalog, budget=2, emit=Emitter(sink)), sink


def test_search_returns_a_menu_and_emits_metadata() -> None:
    discovery, sink = setup()
    search_tools, _ = discovery.tools
    out = search_tools.fn(query="pdf document", capabilities=["file"])
    assert [row["name"] for row in out["results"]] == ["merge_pdfs", "read_pdf"] or [
        row["name"] for row in out["results"]] == ["read_pdf", "merge_pdfs"]
    assert set(out["results"][0]) == {"name", "description", "capabilities"}
    assert "call activate_tool" in out["next"]
    (event,) = sink.named("searched")
    assert event.data["candidates"] == 2 and event.data["filters"] == {"capabilities": ["file"]}
    assert set(event.data["results"]) == {"read_pdf", "merge_pdfs"}
    assert "also" not in event.data  # no other phrasings, nothing said


def test_the_searched_event_records_the_other_phrasings() -> None:
    discovery, sink = setup()
    search_tools, _ = discovery.tools
    out = search_tools.fn(query="combine files", also=["merge pdf documents", 7])
    assert out["results"][0]["name"] == "merge_pdfs"
    (event,) = sink.named("searched")
    assert event.data["query"] == "combine files"
    assert event.data["also"] == ["merge pdf documents"]  # only strings are phrasings


def test_search_with_nothing_to_search_for_is_refused() -> None:
    discovery, _ = setup()
    with pytest.raises(ToolInputError) as info:
        discovery.tools[0].fn()
    assert str(info.value) == ("search_tools needs a query or at least one filter. Capability "
                               "roots in the catalog: board, file.")


def test_unknown_filter_is_a_teaching_refusal() -> None:
    discovery, _ = setup()
    with pytest.raises(ToolInputError, match=r"did you mean 'board'\?"):
        discovery.tools[0].fn(query="x", capabilities=["boards"])


def test_nothing_found_says_to_keep_looking() -> None:
    discovery, _ = setup()
    # words no tool knows: the page abstains, naming them and the capability roots
    out = discovery.tools[0].fn(query="weather forecast")
    assert out["results"] == [] and out["unmatched"] == ["weather", "forecast"]
    assert out["next"] == ("No tool fits this need. No tool mentions 'weather', 'forecast'. "
                           "Try other words or a capability root (board, file).")
    # known words outside the filter's scope: look again, more broadly
    out = discovery.tools[0].fn(query="list boards", capabilities=["file"])
    assert out["results"] == [] and "unmatched" not in out
    assert "before concluding the capability is missing" in out["next"]


def test_activate_validates_names_with_did_you_mean() -> None:
    discovery, sink = setup()
    _, activate_tool = discovery.tools
    with pytest.raises(ToolInputError) as info:
        activate_tool.fn(names=["raed_pdf", "read_pdf"])
    assert str(info.value) == (
        "There is no tool 'raed_pdf' in the catalog (did you mean 'read_pdf'?). Nothing was "
        "activated; call activate_tool again with exact names from a search_tools result."
    )
    assert sink.named("activated") == []
    with pytest.raises(ToolInputError, match=r"^There is no tool 'zzz' in the catalog\. "):
        activate_tool.fn(names=["zzz"])


def test_activate_accepts_known_names_and_emits() -> None:
    discovery, sink = setup()
    out = discovery.tools[1].fn(names=["read_pdf", "merge_pdfs", "list_boards"])
    assert out["activated"] == ["read_pdf", "merge_pdfs", "list_boards"]
    assert "Only the last 2 fit" in out["note"]
    assert sink.named("activated")[0].data == {"names": ["read_pdf", "merge_pdfs",
                                                         "list_boards"]}


def test_scaffolding_schemas_come_from_type_hints() -> None:
    discovery, _ = setup()
    search_tools, activate_tool = discovery.tools
    props = search_tools.input_schema["properties"]
    assert set(props) == {"query", "also", "capabilities", "domains", "entities",
                          "relationships", "limit"}
    assert activate_tool.input_schema["required"] == ["names"]


def test_a_note_ends_the_description_and_row_extras_join_each_row() -> None:
    catalog = Catalog([make_tool("read_pdf", "Read the text of a PDF document.")])
    search_tools, _ = Discovery(catalog, note="Unavailable now: 'mail' (it failed to start).",
                                row_extras=lambda name: {"title": name.upper()}).tools
    assert search_tools.description.endswith(
        "load tools with activate_tool. Unavailable now: 'mail' (it failed to start).")
    out = search_tools.fn(query="pdf")
    assert out["results"][0]["name"] == "read_pdf" and out["results"][0]["title"] == "READ_PDF"
    plain, _ = Discovery(catalog).tools
    assert plain.description.endswith("load tools with activate_tool.")
