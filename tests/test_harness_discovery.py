"""The harness with discovery: search, activate, call — the surface follows the transcript."""

from __future__ import annotations

import msgspec

from byref.discovery import Catalog, Discovery
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.testing import result_text
from byref.tools import Tool, tool


def catalog_tools() -> list[Tool]:
    made = []
    for i in range(30):
        made.append(Tool(name=f"widget_op_{i}", description=f"Operate widget number {i}.",
                         fn=lambda x="", i=i: f"tool {i}: {x}",
                         input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
                         capabilities=(f"widget.op{i % 3}",)))
    made.append(Tool(name="archive_invoice", description="Archive a paid invoice by its number.",
                     fn=lambda number="": f"archived {number}",
                     input_schema={"type": "object",
                                   "properties": {"number": {"type": "string"}}},
                     capabilities=("billing.invoice",)))
    return made


@tool
def note(text: str) -> str:
    """Keep a note."""
    return text


def test_search_activate_call_through_the_harness() -> None:
    discovery = Discovery(Catalog(catalog_tools()), budget=4)
    model = ScriptedModel([
        call("search_tools", {"query": "archive a paid invoice"}),
        call("activate_tool", lambda r: {"names": [last_result(r)["results"][0]["name"]]}),
        call("archive_invoice", {"number": "INV-7"}),
        say("Archived."),
    ])
    h = Harness(model, [note], discovery=discovery)
    run = h.run_sync("Archive invoice INV-7.")
    names = [[d["name"] for d in r.tools] for r in run.requests]
    # Nothing stored yet: the readers are callable but not declared (issue 25.10).
    assert names[0] == ["activate_tool", "note", "search_tools"]
    assert names[1] == names[0]  # a search declares nothing
    assert "archive_invoice" in names[2]
    assert run.requests[0].tools is run.requests[1].tools  # unchanged set: identical object
    assert run.requests[-1].system.endswith("You currently have 1 of 4 activated tools loaded.")
    assert "<tool_capabilities>" in run.requests[0].system
    first = msgspec.json.encode(list(run.requests[0].tools))
    assert b"widget_op_" not in first  # undiscovered tools cost the capability line only
    last = [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]
    assert result_text(last) == "archived INV-7"
