"""byref inside LangChain v1 (`byref.integrations.langchain.ByrefMiddleware`), driven by a
scripted LangChain chat model (a `BaseChatModel` that plays steps and meters what it was given):
the status-report scenario end to end, async and sync tools, refusals as error ToolMessages,
search over the 2,565-tool catalog, budgeted history, and ChatOpenAI over a loopback wire."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents", reason="needs the langchain extra: pip install "
                    "'byref[langchain]'")

from helpers_integrations import (
    CATALOG_DIR,
    CATALOG_MISSING,
    OPEN,
    QUESTION,
    RECIPES,
    TITLE,
    Scenario,
    harness_chars,
    harness_first_turn_chars,
    mcp_catalog,
    scenario,
    visible_chars,
)
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from byref.integrations.langchain import ByrefMiddleware
from byref.testing import result_text

Step = Callable[[list[BaseMessage]], AIMessage]


class Scripted(BaseChatModel):
    """A LangChain chat model that plays `steps` and meters each request it receives."""

    # pydantic fields (BaseChatModel is a pydantic model): each instance gets its own lists.
    steps: list[Any]
    chars: list[int] = Field(default_factory=list)
    texts: list[str] = Field(default_factory=list)
    tools: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "byref-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[t if isinstance(t, dict) else convert_to_openai_tool(t)
                                for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        functions = [t["function"] for t in kwargs.get("tools", [])]
        declarations = [{"name": f["name"], "description": f.get("description", ""),
                         "input_schema": f.get("parameters")} for f in functions]
        system = "".join(m.text for m in messages if isinstance(m, SystemMessage))
        texts = [t for m in messages if not isinstance(m, SystemMessage) for t in _texts(m)]
        self.chars.append(visible_chars(system, declarations, texts))
        self.texts.append("\n".join([system, json.dumps(declarations), *texts]))
        self.tools.append([f["name"] for f in functions])
        message = self.steps[len(self.chars) - 1](messages)
        return ChatResult(generations=[ChatGeneration(message=message)])


def scripted(steps: list[Step]) -> Scripted:
    return Scripted(steps=steps)


def _texts(message: BaseMessage) -> list[str]:
    out = [message.text] if message.text else []
    if isinstance(message, AIMessage):
        out.extend(c["name"] + json.dumps(c["args"]) for c in message.tool_calls)
    return out


_ids = iter(range(10**6))


def call(name: str, args: dict[str, Any] | Callable[[Any], dict[str, Any]]) -> Step:
    def step(messages: list[BaseMessage]) -> AIMessage:
        given = args(last_result(messages)) if callable(args) else args
        return AIMessage(content="", tool_calls=[{"name": name, "args": given,
                                                  "id": f"call_{next(_ids)}"}])
    return step


def say(text: str) -> Step:
    return lambda messages: AIMessage(content=text)


def last_tool(messages: list[BaseMessage]) -> ToolMessage:
    return next(m for m in reversed(messages) if isinstance(m, ToolMessage))


def last_result(messages: list[BaseMessage]) -> Any:
    try:
        return json.loads(result_text(last_tool(messages).text))
    except (StopIteration, ValueError):
        return None


def lc_tools(s: Scenario) -> list[BaseTool]:
    """The scenario's tools as a LangChain user writes them: the export returns its JSON
    document, the PDF tool returns the PDF as its artifact."""

    @tool
    def export_work_items(project: str) -> dict[str, Any]:
        """Export every work item of a project as one JSON document ({"project", "count",
        "items": [...]}; each item has id, title, status, priority, assignee, updated)."""
        return dict(json.loads(s.export.read_text()))

    @tool(response_format="content_and_artifact")
    def generate_pdf(title: str, rows: list[dict[str, Any]]) -> tuple[str, Any]:
        """Render work-item rows as a PDF table report and return the PDF."""
        return f"PDF of {len(rows)} rows", s.generate_pdf(title, rows)

    return [export_work_items, generate_pdf]


def status_report_steps() -> list[Step]:
    return [
        call("export_work_items", {"project": "ATLAS"}),
        call("query_json", lambda r: {"source": r["value"], "path": "/items", "filter": OPEN}),
        call("generate_pdf", lambda r: {"title": TITLE, "rows": r["value"]}),
        say("Done: the PDF status report of the open ATLAS work items is ready."),
    ]


def run(model: Scripted, tools: list[Any], middleware: list[Any], text: str = QUESTION, *,
        use_async: bool = False) -> list[BaseMessage]:
    agent = create_agent(model, tools=tools, middleware=middleware)
    given = {"messages": [{"role": "user", "content": text}]}
    if use_async:  # LangChain runs `async def` tools only under ainvoke
        import asyncio

        return list(asyncio.run(agent.ainvoke(given))["messages"])
    return list(agent.invoke(given)["messages"])


# -- the status-report scenario ------------------------------------------------------------------
def test_status_report_routes_refs_exactly_and_stores_what_is_large(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    model = scripted(status_report_steps())
    messages = run(model, lc_tools(s), [ByrefMiddleware()])
    assert messages[-1].text.startswith("Done")
    assert s.rows_identical() and len(s.expected) == 148
    assert s.pdf.read_bytes().startswith(b"%PDF")
    seen = "\n".join(model.texts)
    assert not any(r in seen for r in RECIPES)
    assert max(model.chars) < 15_000  # the 2.1 MB export was stored, not inlined
    pdf_call = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls][2]
    assert "$ref" in pdf_call.tool_calls[0]["args"]["rows"]
    # The readers come with the first stored result (the export), not before it.
    assert not {"read_json", "query_json", "read_result"} & set(model.tools[0])
    assert {"read_json", "query_json", "read_result"} <= set(model.tools[1])
    own = harness_chars(tmp_path)
    # LangChain's own messages cost ~3.7k more over the run than the harness's; declarations
    # are the same either way.
    assert sum(model.chars) <= own * 1.15, (sum(model.chars), own)


def test_without_byref_the_export_fills_the_context(tmp_path: Path) -> None:
    s = scenario(tmp_path)

    def retype(r: Any) -> dict[str, Any]:
        return {"title": TITLE, "rows": [i for i in r["items"] if i["status"] == "open"]}

    naive = scripted([call("export_work_items", {"project": "ATLAS"}),
                      call("generate_pdf", retype), say("Done.")])
    run(naive, lc_tools(s), [])
    assert s.delivered.rows == s.expected
    (tmp_path / "byref").mkdir()
    s2 = scenario(tmp_path / "byref")
    with_byref = scripted(status_report_steps())
    run(with_byref, lc_tools(s2), [ByrefMiddleware()])
    assert sum(naive.chars) > 100 * sum(with_byref.chars), (sum(naive.chars),
                                                             sum(with_byref.chars))


# -- async and sync tools, refusals --------------------------------------------------------------
def test_an_async_tool_receives_a_sync_tools_stored_result_exactly_under_ainvoke() -> None:
    import asyncio

    got: list[list[int]] = []

    @tool
    def numbers(n: int) -> list[int]:
        """The first n square numbers."""
        return [i * i for i in range(n)]

    @tool
    async def total(values: list[int]) -> int:
        """The sum of some numbers."""
        got.append(values)
        return sum(values)

    model = scripted([call("numbers", {"n": 20_000}),
                      call("total", lambda r: {"values": r["value"]}), say("ok")])
    agent = create_agent(model, tools=[numbers, total], middleware=[ByrefMiddleware()])
    out = asyncio.run(agent.ainvoke({"messages": [{"role": "user", "content": "add"}]}))
    assert got == [[i * i for i in range(20_000)]]
    assert last_result(out["messages"]) == sum(i * i for i in range(20_000))
    assert "399960001" not in model.texts[1] and max(model.chars) < 10_000


def test_a_fabricated_ref_is_an_error_tool_message_and_the_run_goes_on() -> None:
    ran: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo some text."""
        ran.append(text)
        return text

    bad = {"$ref": {"type": "Blob", "key": "art_0000000000000000000000"}}
    model = scripted([call("echo", {"text": bad}), say("I could not read it.")])
    messages = run(model, [echo], [ByrefMiddleware()], "echo it")
    answer = last_tool(messages)
    assert ran == [] and answer.status == "error"
    assert "art_0000000000000000000000" in answer.text
    assert messages[-1].text == "I could not read it."


def test_langchains_own_argument_check_runs_on_the_resolved_value() -> None:
    ran: list[int] = []

    @tool
    def words(n: int) -> str:
        """n words."""
        return "word " * n

    @tool
    def double(n: int) -> int:
        """Twice n."""
        ran.append(n)
        return 2 * n

    model = scripted([call("words", {"n": 3}),
                      call("double", {"n": {"$ref": {"type": "Message", "seq": 1, "part": 0}}}),
                      say("no")])
    answer = last_tool(run(model, [words, double], [ByrefMiddleware()], "x"))
    assert ran == [] and answer.status == "error"
    assert "int" in answer.text


def test_calls_of_one_turn_are_one_group_and_each_ref_is_exact() -> None:
    got: list[tuple[list[int], list[int]]] = []

    @tool
    async def numbers(start: int) -> list[int]:
        """Ten thousand numbers from start."""
        return list(range(start, start + 10_000))

    @tool
    def pair(a: list[int], b: list[int]) -> str:
        """Compare two lists."""
        got.append((a, b))
        return f"{len(a)} and {len(b)}"

    def both(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(content="", tool_calls=[
            {"name": "numbers", "args": {"start": 0}, "id": "c1"},
            {"name": "numbers", "args": {"start": 5}, "id": "c2"}])

    def refs(messages: list[BaseMessage]) -> AIMessage:
        shown = {m.tool_call_id: json.loads(m.text) for m in messages
                 if isinstance(m, ToolMessage)}
        return AIMessage(content="", tool_calls=[{"name": "pair", "id": "c3", "args": {
            "a": shown["c1"]["value"], "b": shown["c2"]["value"]}}])

    middleware = ByrefMiddleware()
    run(scripted([both, refs, say("ok")]), [numbers, pair], [middleware], "x", use_async=True)
    assert got == [(list(range(10_000)), list(range(5, 10_005)))]
    record = list(middleware.bridge.transcript)
    assert [(m.role, len(m.parts)) for m in record[:2]] == [("assistant", 2), ("tool", 2)]


# -- find, don't load ----------------------------------------------------------------------------
@pytest.mark.skipif(not CATALOG_DIR.is_dir(), reason=CATALOG_MISSING)
def test_the_2565_tool_catalog_first_turn_matches_the_harness() -> None:
    model = scripted([say("ok")])
    run(model, [], [ByrefMiddleware(catalog=mcp_catalog())])
    own = harness_first_turn_chars()
    assert model.chars[0] <= own * 1.10, (model.chars[0], own)
    assert len(model.tools[0]) < 10


@pytest.mark.skipif(not CATALOG_DIR.is_dir(), reason=CATALOG_MISSING)
def test_search_activate_call_round_trip_over_the_catalog(tmp_path: Path) -> None:
    s = scenario(tmp_path, size=200_000)

    def found(r: Any) -> dict[str, Any]:
        names = [hit["name"] for hit in r["results"]]
        assert "export_work_items" in names, r
        return {"names": ["export_work_items"]}

    model = scripted([call("search_tools", {"query": "export work items of a project"}),
                      call("activate_tool", found),
                      call("export_work_items", {"project": "ATLAS"}), say("exported")])
    messages = run(model, lc_tools(s)[:1],
                   [ByrefMiddleware(catalog=mcp_catalog(), search=True)], "export ATLAS")
    assert "export_work_items" not in model.tools[0]
    assert "export_work_items" in model.tools[2]
    assert last_result(messages)["kind"] == "tool-result/export_work_items"


# -- budgeted history ----------------------------------------------------------------------------
def test_settled_results_become_exact_reread_stubs_under_the_budget() -> None:
    @tool
    def page(n: int) -> list[dict[str, Any]]:
        """Page n of the log."""
        return [{"n": n, "line": i, "text": f"entry {n}-{i} " * 4} for i in range(120)]

    stub: dict[str, Any] = {}

    def find_stub(messages: list[BaseMessage]) -> AIMessage:
        for m in messages:
            if isinstance(m, ToolMessage) and _replaced(m.text):
                stub.update(json.loads(m.text))
                return AIMessage(content="", tool_calls=[
                    {"name": "read_result", "args": {"ref": stub["reread"]}, "id": "reread"}])
        raise AssertionError("no result was replaced")

    middleware = ByrefMiddleware(budget=25_000)
    model = scripted([call("page", {"n": 1}), call("page", {"n": 2}), call("page", {"n": 3}),
                      call("page", {"n": 4}), find_stub, say("read")])
    messages = run(model, [page], [middleware], "read the log")
    assert max(model.chars) <= 25_000
    assert any(a.replaced_groups for a in middleware.bridge.assembled)
    assert stub["note"].startswith("Moved out to fit the request budget")
    reread = last_result(messages)
    assert reread["records"] == page.invoke({"n": 1})
    assert reread["coverage"]["byteComplete"] is True
    first = next(m for m in messages if isinstance(m, ToolMessage))
    assert not _replaced(first.text)  # the graph state keeps the real result


def _replaced(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("replaced") is True


# -- over the wire -------------------------------------------------------------------------------
def test_status_report_with_chat_openai_over_a_loopback_wire(tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai", reason="needs langchain-openai")
    from helpers_integrations import ChatWire, status_report_over_chat
    from langchain_openai import ChatOpenAI

    s = scenario(tmp_path)
    with ChatWire(status_report_over_chat) as wire:
        model = ChatOpenAI(model="gpt-5", base_url=wire.base_url, api_key="test")
        messages = run(model, lc_tools(s), [ByrefMiddleware()])  # type: ignore[arg-type]
    assert messages[-1].text.startswith("Done")
    assert s.rows_identical()
    sent = wire.sent()
    assert len(wire.bodies) == 4 and len(sent) < 60_000
    assert not any(r in sent for r in RECIPES)
    declared = {t["function"]["name"]: t["function"] for t in wire.bodies[0]["tools"]}
    assert "anyOf" in declared["generate_pdf"]["parameters"]["properties"]["rows"]
