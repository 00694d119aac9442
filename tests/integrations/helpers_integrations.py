"""What every framework integration's tests share: the status-report scenario's data and tools,
byref's own harness on the same scenario (the figure each integration is held to), and the
real 2,565-tool MCP catalog (skipped without ../shared/eval)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.demo.data import DEFAULT_SIZE, open_rows, write_export
from byref.demo.scenario import OPEN, QUESTION, TITLE, run_byref
from byref.demo.tools import Delivered, make_tools
from byref.discovery import Catalog, Discovery, load_catalog
from byref.harness import Harness, ScriptedModel, say
from byref.jsonview import dumps, encode
from byref.testing import result_text
from byref.tools import Tool
from byref.transcript import Part

EVAL = Path(__file__).resolve().parents[3] / "shared" / "eval"
CATALOG_DIR = EVAL / "mcp-catalog"
CATALOG_MISSING = f"the 2,565-tool MCP catalog is not at {CATALOG_DIR} (../shared/eval)"
RECIPES = ("JsonPointer", "JsonQuery")
__all__ = ["CATALOG_DIR", "CATALOG_MISSING", "OPEN", "QUESTION", "RECIPES", "TITLE"]


@dataclass
class Scenario:
    """The export, the two tools (as plain functions, as a framework user would write them)
    and what generate_pdf must receive."""

    export: Path
    pdf: Path
    delivered: Delivered
    tools: list[Tool]
    expected: list[dict[str, Any]]

    @property
    def export_work_items(self) -> Any:
        return self.tools[0].fn

    @property
    def generate_pdf(self) -> Any:
        return self.tools[1].fn

    def rows_identical(self) -> bool:
        return self.delivered.calls == 1 and encode(self.delivered.rows) == encode(self.expected)


def scenario(tmp: Path, size: int = DEFAULT_SIZE) -> Scenario:
    export = tmp / "export.json"
    write_export(export, size)
    delivered = Delivered()
    tools = make_tools(export, tmp / "status-report.pdf", delivered)
    return Scenario(export, tmp / "status-report.pdf", delivered, tools, open_rows(export))


def harness_chars(tmp: Path) -> int:
    """Model-visible characters of byref's own harness on the scenario: every request's system
    text, declarations and messages, summed over the run's requests."""
    out = tmp / "harness"
    out.mkdir(exist_ok=True)
    export = out / "export.json"
    write_export(export, DEFAULT_SIZE)
    _, requests, delivered = run_byref(export, out)
    assert len(delivered.rows) == 148
    return sum(r.chars() for r in requests)


def visible_chars(system: str, declarations: list[dict[str, Any]], texts: list[str]) -> int:
    """One request's model-visible characters, counted as byref's harness counts its own
    (`Request.chars`): system text, declarations as JSON, every message's text."""
    return len(system) + len(dumps(declarations)) + sum(map(len, texts))


def last_json(text: str) -> Any:
    return json.loads(text)


def mcp_catalog(*extra: Tool) -> Catalog:
    catalog = load_catalog(CATALOG_DIR)
    for t in extra:
        catalog.add(t)
    return catalog


def harness_first_turn_chars() -> int:
    """Characters of the first request byref's harness sends with the 2,565-tool catalog behind
    search (and its store's readers): the question, the system text, the discovery surface."""
    harness = Harness(ScriptedModel([say("ok")]), [],
                      discovery=Discovery(load_catalog(CATALOG_DIR)))
    harness.transcript.append("user", [Part(type="text", value=QUESTION)])
    return harness.request().chars()


def chat_completion(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> dict[str, Any]:
    """A Chat Completions answer: tool calls (name, arguments) or a final text."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}_{name}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls)]
    return {"id": "chatcmpl-byref", "object": "chat.completion", "created": 0, "model": "gpt-5",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def chat_tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a Chat Completions request carries, oldest first, as text."""
    out = []
    for m in body["messages"]:
        if m.get("role") == "tool":
            content = m["content"]
            out.append(content if isinstance(content, str) else "".join(
                c.get("text", "") for c in content))
    return out


def status_report_over_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The status-report scenario as a model on the wire plays it, reading refs it was shown."""
    results = chat_tool_results(body)
    if not results:
        return chat_completion(("export_work_items", {"project": "ATLAS"}))
    last = json.loads(result_text(results[-1]))
    if len(results) == 1:
        return chat_completion(("query_json", {"source": last["value"], "path": "/items",
                                               "filter": OPEN}))
    if len(results) == 2:
        return chat_completion(("generate_pdf", {"title": TITLE, "rows": last["value"]}))
    return chat_completion(text="Done: the PDF status report is ready.")
