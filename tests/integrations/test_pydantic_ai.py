"""byref inside pydantic-ai (`byref.integrations.pydantic_ai.Byref`), driven by pydantic-ai's own
`FunctionModel`: the status-report scenario end to end, async and sync tools, refusals as failed
tool returns, search over the 2,565-tool catalog, budgeted history."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="needs the pydantic-ai extra: pip install "
                    "'byref[pydantic-ai]'")

from helpers_integrations import (
    CATALOG_DIR,
    CATALOG_MISSING,
    OPEN,
    QUESTION,
    RECIPES,
    TITLE,
    harness_chars,
    harness_first_turn_chars,
    mcp_catalog,
    scenario,
    visible_chars,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from byref.integrations.pydantic_ai import Byref
from byref.testing import result_text

# The scenario's tools return byref Payloads, a type pydantic-ai has no return schema for.
pytestmark = pytest.mark.filterwarnings("ignore:Could not generate return schema")


@pytest.fixture(autouse=True)
def _no_loop_left_open() -> Iterator[None]:
    """`Agent.run_sync` runs on this thread's current event loop, making and setting one it
    never closes when there is none (pydantic-ai's `_utils.get_event_loop`): it is given one
    here, closed after the test, not left to the garbage collector."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


Step = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


class Scripted:
    """A FunctionModel body that plays `steps` in order and meters what the model was shown."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.chars: list[int] = []
        self.texts: list[str] = []
        self.tools: list[list[str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        texts = [t for m in messages for t in _texts(m)]
        declarations = [{"name": t.name, "description": t.description or "",
                         "input_schema": t.parameters_json_schema} for t in info.function_tools]
        system = info.instructions or ""
        self.chars.append(visible_chars(system, declarations, texts))
        self.texts.append("\n".join([system, json.dumps(declarations), *texts]))
        self.tools.append([t.name for t in info.function_tools])
        return self.steps[len(self.chars) - 1](messages, info)

    def model(self) -> FunctionModel:
        return FunctionModel(self)


def _texts(message: ModelMessage) -> list[str]:
    out = []
    for part in message.parts:
        if isinstance(part, ToolCallPart):
            out.append(part.tool_name + part.args_as_json_str())
        elif isinstance(part, ToolReturnPart):
            out.append(part.model_response_str())
        elif isinstance(part, RetryPromptPart):
            out.append(part.model_response())
        elif isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str):
            out.append(part.content)
    return out


def call(name: str, args: dict[str, Any] | Callable[[Any], dict[str, Any]]) -> Step:
    def step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        given = args(last_result(messages)) if callable(args) else args
        return ModelResponse(parts=[ToolCallPart(name, given)])
    return step


def say(text: str) -> Step:
    return lambda messages, info: ModelResponse(parts=[TextPart(text)])


def last_return(messages: list[ModelMessage]) -> ToolReturnPart:
    for message in reversed(messages):
        for part in reversed(message.parts):
            if isinstance(part, ToolReturnPart):
                return part
    raise AssertionError("no tool return yet")


def last_result(messages: list[ModelMessage]) -> Any:
    text = result_text(last_return(messages).model_response_str())
    try:
        return json.loads(text)
    except ValueError:
        return text


def status_report_steps() -> list[Step]:
    return [
        call("export_work_items", {"project": "ATLAS"}),
        call("query_json", lambda r: {"source": r["value"], "path": "/items", "filter": OPEN}),
        call("generate_pdf", lambda r: {"title": TITLE, "rows": r["value"]}),
        say("Done: the PDF status report of the open ATLAS work items is ready."),
    ]


# -- the status-report scenario ------------------------------------------------------------------
def test_status_report_routes_refs_exactly_and_stores_what_is_large(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    script = Scripted(status_report_steps())
    agent = Agent(script.model(), tools=[s.export_work_items, s.generate_pdf],
                  capabilities=[Byref()])
    result = agent.run_sync(QUESTION)
    assert result.output.startswith("Done")
    assert s.rows_identical()  # 148 rows reached the PDF tool byte-identical
    assert len(s.expected) == 148 and s.pdf.read_bytes().startswith(b"%PDF")
    seen = "\n".join(script.texts)
    assert not any(r in seen for r in RECIPES)  # nothing recipe-shaped is model-visible
    assert s.expected[0]["title"] not in seen.split("preview", 1)[0]
    # The 2.1 MB export and the PDF were stored, not inlined: every request stays small.
    assert max(script.chars) < 15_000
    # The model passed the rows as a reference, and the read tools were declared.
    calls = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolCallPart)]
    assert "$ref" in calls[2].args_as_dict()["rows"]
    # The readers come with the first stored result (the export), not before it.
    assert not {"read_json", "query_json", "read_result"} & set(script.tools[0])
    assert {"read_json", "query_json", "read_result"} <= set(script.tools[1])
    # No more than 10% above byref's own harness on the same scenario (it declares `present`
    # too, and a longer system text, so this run is a little under it).
    own = harness_chars(tmp_path)
    assert sum(script.chars) <= own * 1.10, (sum(script.chars), own)


def test_without_byref_the_export_fills_the_context(tmp_path: Path) -> None:
    """The baseline the closing note quotes: the same agent, no capability, the export inlined
    and the open rows retyped by the model."""
    s = scenario(tmp_path)

    def export_work_items(project: str) -> dict[str, Any]:
        """Export every work item of a project as one JSON document."""
        return dict(json.loads(s.export.read_text()))

    def generate_pdf(title: str, rows: list[dict[str, Any]]) -> str:
        """Render work-item rows as a PDF table report."""
        s.generate_pdf(title, rows)
        return f"wrote {len(rows)} rows"

    def retype(r: Any) -> dict[str, Any]:
        return {"title": TITLE, "rows": [i for i in r["items"] if i["status"] == "open"]}

    naive = Scripted([call("export_work_items", {"project": "ATLAS"}),
                      call("generate_pdf", retype), say("Done.")])
    Agent(naive.model(), tools=[export_work_items, generate_pdf]).run_sync(QUESTION)
    with_byref = Scripted(status_report_steps())
    (tmp_path / "byref").mkdir()
    s2 = scenario(tmp_path / "byref")
    Agent(with_byref.model(), tools=[s2.export_work_items, s2.generate_pdf],
          capabilities=[Byref()]).run_sync(QUESTION)
    assert s.delivered.rows == s.expected
    assert sum(naive.chars) > 100 * sum(with_byref.chars), (sum(naive.chars),
                                                             sum(with_byref.chars))


# -- async and sync tools, refusals --------------------------------------------------------------
def test_an_async_tool_receives_a_sync_tools_stored_result_exactly() -> None:
    got: list[list[int]] = []

    def numbers(n: int) -> list[int]:
        """The first n square numbers."""
        return [i * i for i in range(n)]

    async def total(values: list[int]) -> int:
        """The sum of some numbers."""
        got.append(values)
        return sum(values)

    script = Scripted([call("numbers", {"n": 20_000}),
                       call("total", lambda r: {"values": r["value"]}), say("ok")])
    agent = Agent(script.model(), tools=[numbers, total], capabilities=[Byref()])
    result = agent.run_sync("add the squares")
    assert got == [[i * i for i in range(20_000)]]
    assert last_result(result.all_messages()) == sum(i * i for i in range(20_000))
    assert "399960001" not in script.texts[1]  # the last square was stored, not shown
    assert max(script.chars) < 10_000


def test_a_fabricated_ref_is_a_failed_tool_return_and_the_run_goes_on() -> None:
    ran: list[Any] = []

    def echo(text: str) -> str:
        """Echo some text."""
        ran.append(text)
        return text

    bad = {"$ref": {"type": "Blob", "key": "art_0000000000000000000000"}}
    script = Scripted([call("echo", {"text": bad}), say("I could not read it.")])
    result = Agent(script.model(), tools=[echo], capabilities=[Byref()]).run_sync("echo it")
    answer = last_return(result.all_messages())
    assert ran == [] and answer.outcome == "failed"
    assert "art_0000000000000000000000" in answer.model_response_str()
    assert result.output == "I could not read it."


def test_pydantic_ai_still_checks_the_resolved_arguments() -> None:
    """A ref resolves to a value that does not fit the tool's own types: the tool does not run,
    and pydantic-ai's validation message reaches the model as the failure."""
    ran: list[int] = []

    def words(n: int) -> str:
        """n words."""
        return "word " * n

    def double(n: int) -> int:
        """Twice n."""
        ran.append(n)
        return 2 * n

    script = Scripted([call("words", {"n": 3}),
                       call("double", lambda r: {"n": {"$ref": {"type": "Message", "seq": 1,
                                                                "part": 0}}}),
                       say("no")])
    result = Agent(script.model(), tools=[words, double], capabilities=[Byref()]).run_sync("x")
    answer = last_return(result.all_messages())
    assert ran == [] and answer.outcome == "failed"
    assert "int" in answer.model_response_str()


# -- find, don't load ----------------------------------------------------------------------------
@pytest.mark.skipif(not CATALOG_DIR.is_dir(), reason=CATALOG_MISSING)
def test_the_2565_tool_catalog_first_turn_matches_the_harness() -> None:
    script = Scripted([say("ok")])
    agent = Agent(script.model(), capabilities=[Byref(catalog=mcp_catalog())])
    agent.run_sync(QUESTION)
    own = harness_first_turn_chars()
    assert script.chars[0] <= own * 1.10, (script.chars[0], own)
    assert len(script.tools[0]) < 10  # search_tools, activate_tool, the readers


@pytest.mark.skipif(not CATALOG_DIR.is_dir(), reason=CATALOG_MISSING)
def test_search_activate_call_round_trip_over_the_catalog(tmp_path: Path) -> None:
    s = scenario(tmp_path, size=200_000)

    def found(r: Any) -> dict[str, Any]:
        names = [hit["name"] for hit in r["results"]] if isinstance(r, dict) else []
        assert "export_work_items" in names, r
        return {"names": ["export_work_items"]}

    script = Scripted([
        call("search_tools", {"query": "export work items of a project"}),
        call("activate_tool", found),
        call("export_work_items", {"project": "ATLAS"}),
        say("exported"),
    ])
    agent = Agent(script.model(), tools=[s.export_work_items],
                  capabilities=[Byref(catalog=mcp_catalog(), search=True)])
    result = agent.run_sync("export the ATLAS work items")
    assert "export_work_items" not in script.tools[0]  # behind search on turn 1
    assert "export_work_items" in script.tools[2]  # declared once activated
    assert last_result(result.all_messages())["kind"] == "export/work-items"


# -- budgeted history ----------------------------------------------------------------------------
def test_settled_results_become_exact_reread_stubs_under_the_budget() -> None:
    def page(n: int) -> list[dict[str, Any]]:
        """Page n of the log."""
        return [{"n": n, "line": i, "text": f"entry {n}-{i} " * 4} for i in range(120)]

    stub: dict[str, Any] = {}

    def reread(r: Any) -> dict[str, Any]:
        return {"ref": stub["reread"]}

    def find_stub(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for m in messages:
            for p in m.parts:
                if isinstance(p, ToolReturnPart) and _replaced(p.model_response_str()):
                    stub.update(json.loads(p.model_response_str()))
                    return ModelResponse(parts=[ToolCallPart("read_result", reread(None))])
        raise AssertionError("no result was replaced")

    byref = Byref(budget=25_000)
    script = Scripted([call("page", {"n": 1}), call("page", {"n": 2}), call("page", {"n": 3}),
                       call("page", {"n": 4}), find_stub, say("read")])
    result = Agent(script.model(), tools=[page], capabilities=[byref]).run_sync("read the log")
    assert max(script.chars) <= 25_000
    assembled = byref.bridge.assembled
    assert any(a.replaced_groups for a in assembled)
    assert stub["note"].startswith("Moved out to fit the request budget")
    reread_value = last_result(result.all_messages())
    assert reread_value["records"] == page(1)  # the stub rereads the replaced result exactly
    assert reread_value["coverage"]["byteComplete"] is True
    # Replacement is sticky: once replaced, every later request carries the same stub.
    stub_text = json.dumps(stub, separators=(",", ":"))
    later = [t for t in script.texts if stub_text[:60] in t.replace(", ", ",").replace(": ", ":")]
    assert len(later) >= 2
    # The persistent history keeps the real result; only the requests carried stubs.
    first = next(p for m in result.all_messages() if isinstance(m, ModelRequest)
                 for p in m.parts if isinstance(p, ToolReturnPart))
    assert not _replaced(first.model_response_str())


def _replaced(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("replaced") is True


# -- one turn, several calls ---------------------------------------------------------------------
def test_calls_of_one_turn_are_recorded_as_one_group_and_each_ref_is_exact() -> None:
    """pydantic-ai runs a response's calls concurrently: each result gets its own part of the
    turn's one tool message, and a later call can pass both by reference."""
    got: list[tuple[list[int], list[int]]] = []

    async def numbers(start: int) -> list[int]:
        """Ten thousand numbers from start."""
        return list(range(start, start + 10_000))

    def pair(a: list[int], b: list[int]) -> str:
        """Compare two lists."""
        got.append((a, b))
        return f"{len(a)} and {len(b)}"

    def both(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("numbers", {"start": 0}, tool_call_id="c1"),
                                    ToolCallPart("numbers", {"start": 5}, tool_call_id="c2")])

    def refs(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown = {p.tool_call_id: json.loads(p.model_response_str()) for p in messages[-1].parts
                 if isinstance(p, ToolReturnPart)}
        return ModelResponse(parts=[ToolCallPart(
            "pair", {"a": shown["c1"]["value"], "b": shown["c2"]["value"]})])

    byref = Byref()
    script = Scripted([both, refs, say("ok")])
    Agent(script.model(), tools=[numbers, pair], capabilities=[byref]).run_sync("x")
    assert got == [(list(range(10_000)), list(range(5, 10_005)))]
    record = list(byref.bridge.transcript)
    assert [(m.role, len(m.parts)) for m in record[:2]] == [("assistant", 2), ("tool", 2)]


# -- pydantic-ai's own search hook ---------------------------------------------------------------
def test_byref_search_behind_pydantic_ai_tool_search(tmp_path: Path) -> None:
    from pydantic_ai import Tool
    from pydantic_ai.capabilities import ToolSearch

    from byref.integrations.pydantic_ai import byref_search

    s = scenario(tmp_path, size=200_000)

    def make(name: str, text: str) -> Tool[Any]:
        def run(query: str) -> str:
            return f"{name}: {query}"
        return Tool.from_schema(run, name, text, {"type": "object", "properties": {
            "query": {"type": "string"}}, "required": ["query"]})

    others = [make(f"{area}_{verb}", f"{verb.title()} {area} records in the {area} system.")
              for area in ("billing", "crm", "hr", "wiki", "tickets", "assets")
              for verb in ("list", "get", "update", "delete")]
    for t in others:
        t.defer_loading = True
    deferred = [Tool(s.export_work_items, defer_loading=True), *others]
    script = Scripted([call("search_tools", {"queries": ["export the work items of a project"]}),
                       call("export_work_items", {"project": "ATLAS"}), say("done")])
    agent = Agent(script.model(), tools=deferred,
                  capabilities=[ToolSearch(strategy=byref_search(limit=3)), Byref()])
    result = agent.run_sync("export ATLAS")
    assert "export_work_items" not in script.tools[0]  # deferred until found
    assert "export_work_items" in script.tools[1]  # byref's ranking found it; pydantic-ai loaded it
    assert last_result(result.all_messages())["kind"] == "export/work-items"  # and byref placed it
    found = next(p for m in result.all_messages() for p in m.parts
                 if isinstance(p, ToolReturnPart) and p.tool_name == "search_tools")
    names = [t["name"] for t in found.content["discovered_tools"]]
    assert names[0] == "export_work_items" and len(names) <= 3  # byref's ranking, its limit


# -- over the wire -------------------------------------------------------------------------------
def test_status_report_with_pydantic_ais_openai_model_over_a_loopback_wire(
        tmp_path: Path) -> None:
    """pydantic-ai's own OpenAI chat model and the real `openai` client, talking to a Chat
    Completions endpoint on loopback: what crosses the wire is byref's surface."""
    pytest.importorskip("openai", reason="pydantic-ai's OpenAI model needs the openai package")
    from helpers_integrations import status_report_over_chat
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from doubles.chat_server import ChatWire

    s = scenario(tmp_path)
    with ChatWire(status_report_over_chat) as wire:
        # A name no provider retires: pydantic-ai warns on deprecated ones (gpt-5, 2026-12-11),
        # and the wire, not the model, is what this test is about.
        model = OpenAIChatModel("loopback", provider=OpenAIProvider(base_url=wire.base_url,
                                                                    api_key="test"))
        agent = Agent(model, tools=[s.export_work_items, s.generate_pdf],
                      capabilities=[Byref()])
        result = agent.run_sync(QUESTION)
    assert result.output.startswith("Done")
    assert s.rows_identical()
    sent = wire.sent()
    assert len(wire.bodies) == 4 and len(sent) < 60_000  # the export never crossed the wire
    assert not any(r in sent for r in RECIPES)
    declared = {t["function"]["name"]: t["function"] for t in wire.bodies[0]["tools"]}
    rows = declared["generate_pdf"]["parameters"]["properties"]["rows"]
    assert "anyOf" in rows  # every argument accepts a $ref on the wire


def test_byref_search_fuses_the_models_queries() -> None:
    """pydantic-ai hands over the model's several queries: byref fuses them as phrasings of one
    need (a tool two phrasings find outranks one each finds alone), not one list after another."""
    from pydantic_ai.tools import ToolDefinition

    from byref.integrations.pydantic_ai import byref_search

    tools = [ToolDefinition(name=n, description=d, parameters_json_schema={"type": "object"})
             for n, d in (("refund_payment", "Send a customer's payment back to their card."),
                          ("card_details", "Show the card a customer pays with."),
                          ("customer_notes", "Notes a support agent wrote about a customer."))]
    search = byref_search(limit=3)
    alone = search(None, ["customer card"], tools)  # type: ignore[arg-type]
    assert alone[0] != "refund_payment"
    fused = search(None, ["customer card", "payment back"], tools)  # type: ignore[arg-type]
    assert fused[0] == "refund_payment"
    assert search(None, ["", "   "], tools) == []  # type: ignore[arg-type]
