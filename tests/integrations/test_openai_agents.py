"""byref inside the OpenAI Agents SDK (`byref.integrations.openai_agents.Byref`), driven by the
SDK's `Model` interface implemented as a scripted model that meters what it is given: the
status-report scenario end to end, async and sync tools, refusals, search over the 2,565-tool
catalog, budgeted input, and the SDK's chat-completions model over a loopback wire."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the openai-agents extra: pip install "
                    "'byref[openai-agents]'")

from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
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
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from byref.integrations.openai_agents import Byref
from byref.testing import result_text

Step = Callable[[list[Any]], list[Any]]
NO_TRACES = RunConfig(tracing_disabled=True)


class Scripted(Model):
    """The SDK's model interface, played from `steps`; each request it receives is metered."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.chars: list[int] = []
        self.texts: list[str] = []
        self.tools: list[list[str]] = []

    async def get_response(self, system_instructions: str | None, input: Any,
                           model_settings: Any, tools: list[Any], output_schema: Any,
                           handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        declarations = [{"name": t.name, "description": t.description,
                         "input_schema": t.params_json_schema}
                        for t in tools if isinstance(t, FunctionTool)]
        texts = [t for item in items for t in _texts(item)]
        system = system_instructions or ""
        self.chars.append(visible_chars(system, declarations, texts))
        self.texts.append("\n".join([system, json.dumps(declarations), *texts]))
        self.tools.append([d["name"] for d in declarations])
        output = self.steps[len(self.chars) - 1](items)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model answers whole responses")


def _texts(item: Any) -> list[str]:
    value = item if isinstance(item, dict) else item.model_dump()
    if value.get("type") == "function_call":
        return [value["name"] + value["arguments"]]
    if value.get("type") == "function_call_output":
        return [str(value["output"])]
    content = value.get("content")
    if isinstance(content, str):
        return [content]
    return [c.get("text", "") for c in content or [] if isinstance(c, dict)]


_ids = iter(range(10**6))


def call(name: str, args: dict[str, Any] | Callable[[Any], dict[str, Any]]) -> Step:
    def step(items: list[Any]) -> list[Any]:
        given = args(last_result(items)) if callable(args) else args
        return [ResponseFunctionToolCall(type="function_call", call_id=f"call_{next(_ids)}",
                                         name=name, arguments=json.dumps(given))]
    return step


def say(text: str) -> Step:
    return lambda items: [ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]


def outputs(items: list[Any]) -> list[str]:
    return [str(i["output"]) for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"]


def last_result(items: list[Any]) -> Any:
    found = outputs(items)
    if not found:
        return None
    try:
        return json.loads(result_text(found[-1]))
    except ValueError:
        return result_text(found[-1])


def sdk_tools(s: Scenario) -> list[FunctionTool]:
    # rows is a list of open objects, which the SDK's strict schemas cannot say.
    return [function_tool(s.export_work_items),
            function_tool(s.generate_pdf, strict_mode=False)]


def status_report_steps() -> list[Step]:
    return [
        call("export_work_items", {"project": "ATLAS"}),
        call("query_json", lambda r: {"source": r["value"], "path": "/items", "filter": OPEN}),
        call("generate_pdf", lambda r: {"title": TITLE, "rows": r["value"]}),
        say("Done: the PDF status report of the open ATLAS work items is ready."),
    ]


def run(model: Scripted, tools: list[Any], byref: Byref | None, text: str = QUESTION) -> Any:
    agent = Agent(name="ops", model=model, tools=tools)
    if byref is None:
        return asyncio.run(Runner.run(agent, text, run_config=NO_TRACES))
    return asyncio.run(Runner.run(byref.agent(agent), text,
                                  run_config=byref.run_config(NO_TRACES)))


# -- the status-report scenario ------------------------------------------------------------------
def test_status_report_routes_refs_exactly_and_stores_what_is_large(tmp_path: Path) -> None:
    s = scenario(tmp_path)
    model = Scripted(status_report_steps())
    result = run(model, sdk_tools(s), Byref())
    assert result.final_output.startswith("Done")
    assert s.rows_identical() and len(s.expected) == 148
    assert s.pdf.read_bytes().startswith(b"%PDF")
    seen = "\n".join(model.texts)
    assert not any(r in seen for r in RECIPES)
    assert max(model.chars) < 15_000
    pdf_call = [i for i in result.to_input_list() if i.get("type") == "function_call"][2]
    assert "$ref" in json.loads(pdf_call["arguments"])["rows"]
    # The readers come with the first stored result (the export), not before it.
    assert not {"read_json", "query_json", "read_result"} & set(model.tools[0])
    assert {"read_json", "query_json", "read_result"} <= set(model.tools[1])
    own = harness_chars(tmp_path)
    assert sum(model.chars) <= own * 1.10, (sum(model.chars), own)


def test_without_byref_the_export_fills_the_context(tmp_path: Path) -> None:
    s = scenario(tmp_path)

    @function_tool
    def export_work_items(project: str) -> str:
        """Export every work item of a project as one JSON document."""
        return s.export.read_text()

    @function_tool(strict_mode=False)
    def generate_pdf(title: str, rows: list[dict[str, Any]]) -> str:
        """Render work-item rows as a PDF table report."""
        s.generate_pdf(title, rows)
        return f"wrote {len(rows)} rows"

    def retype(r: Any) -> dict[str, Any]:
        return {"title": TITLE, "rows": [i for i in r["items"] if i["status"] == "open"]}

    naive = Scripted([call("export_work_items", {"project": "ATLAS"}),
                      call("generate_pdf", retype), say("Done.")])
    run(naive, [export_work_items, generate_pdf], None)
    assert s.delivered.rows == s.expected
    (tmp_path / "byref").mkdir()
    s2 = scenario(tmp_path / "byref")
    with_byref = Scripted(status_report_steps())
    run(with_byref, sdk_tools(s2), Byref())
    assert sum(naive.chars) > 100 * sum(with_byref.chars), (sum(naive.chars),
                                                             sum(with_byref.chars))


# -- async and sync tools, refusals --------------------------------------------------------------
def test_an_async_tool_receives_a_sync_tools_stored_result_exactly() -> None:
    got: list[list[int]] = []

    @function_tool
    def numbers(n: int) -> list[int]:
        """The first n square numbers."""
        return [i * i for i in range(n)]

    @function_tool
    async def total(values: list[int]) -> int:
        """The sum of some numbers."""
        got.append(values)
        return sum(values)

    model = Scripted([call("numbers", {"n": 20_000}),
                      call("total", lambda r: {"values": r["value"]}), say("ok")])
    result = run(model, [numbers, total], Byref(), "add the squares")
    assert got == [[i * i for i in range(20_000)]]
    assert last_result(result.to_input_list()) == sum(i * i for i in range(20_000))
    assert "399960001" not in model.texts[1] and max(model.chars) < 10_000


def test_a_fabricated_ref_is_refused_and_the_run_goes_on() -> None:
    ran: list[str] = []

    @function_tool
    def echo(text: str) -> str:
        """Echo some text."""
        ran.append(text)
        return text

    bad = {"$ref": {"type": "Blob", "key": "art_0000000000000000000000"}}
    model = Scripted([call("echo", {"text": bad}), say("I could not read it.")])
    byref = Byref()
    result = run(model, [echo], byref, "echo it")
    assert ran == [] and "art_0000000000000000000000" in outputs(result.to_input_list())[-1]
    assert result.final_output == "I could not read it."
    assert [p.is_error for m in byref.bridge.transcript for p in m.parts
            if p.type == "tool_result"] == [True]


def test_the_sdks_own_argument_check_runs_on_the_resolved_value() -> None:
    ran: list[int] = []

    @function_tool
    def words(n: int) -> str:
        """n words."""
        return "word " * n

    @function_tool
    def double(n: int) -> int:
        """Twice n."""
        ran.append(n)
        return 2 * n

    model = Scripted([call("words", {"n": 3}),
                      call("double", {"n": {"$ref": {"type": "Message", "seq": 1, "part": 0}}}),
                      say("no")])
    result = run(model, [words, double], Byref(), "x")
    assert ran == []
    assert "int" in outputs(result.to_input_list())[-1]


# -- find, don't load ----------------------------------------------------------------------------
@pytest.mark.skipif(not CATALOG_DIR.is_dir(), reason=CATALOG_MISSING)
def test_the_2565_tool_catalog_first_turn_matches_the_harness() -> None:
    model = Scripted([say("ok")])
    run(model, [], Byref(catalog=mcp_catalog()))
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

    model = Scripted([call("search_tools", {"query": "export work items of a project"}),
                      call("activate_tool", found),
                      call("export_work_items", {"project": "ATLAS"}), say("exported")])
    result = run(model, sdk_tools(s)[:1], Byref(catalog=mcp_catalog(), search=True),
                 "export ATLAS")
    assert "export_work_items" not in model.tools[0]
    assert "export_work_items" in model.tools[2]
    assert last_result(result.to_input_list())["kind"] == "export/work-items"


# -- budgeted input ------------------------------------------------------------------------------
def test_settled_results_become_exact_reread_stubs_under_the_budget() -> None:
    def rows(n: int) -> list[dict[str, Any]]:
        return [{"n": n, "line": i, "text": f"entry {n}-{i} " * 4} for i in range(120)]

    @function_tool
    def page(n: int) -> list[dict[str, Any]]:
        """Page n of the log."""
        return rows(n)

    stub: dict[str, Any] = {}

    def find_stub(items: list[Any]) -> list[Any]:
        for text in outputs(items):
            value = json.loads(text)
            if isinstance(value, dict) and value.get("replaced") is True:
                stub.update(value)
                return call("read_result", {"ref": value["reread"]})(items)
        raise AssertionError("no result was replaced")

    byref = Byref(budget=25_000)
    model = Scripted([call("page", {"n": 1}), call("page", {"n": 2}), call("page", {"n": 3}),
                      call("page", {"n": 4}), find_stub, say("read")])
    result = run(model, [page], byref, "read the log")
    assert max(model.chars) <= 25_000
    assert any(a.replaced_groups for a in byref.bridge.assembled)
    assert stub["note"].startswith("Moved out to fit the request budget")
    reread = last_result(result.to_input_list())
    assert reread["records"] == rows(1) and reread["coverage"]["byteComplete"] is True
    assert '"replaced"' not in outputs(result.to_input_list())[0]  # the run keeps the result


# -- over the wire -------------------------------------------------------------------------------
def test_status_report_with_the_sdks_chat_completions_model_over_a_loopback_wire(
        tmp_path: Path) -> None:
    from agents import OpenAIChatCompletionsModel
    from helpers_integrations import status_report_over_chat
    from openai import AsyncOpenAI

    from doubles.chat_server import ChatWire

    s = scenario(tmp_path)
    byref = Byref()
    with ChatWire(status_report_over_chat) as wire:
        model = OpenAIChatCompletionsModel(
            "gpt-5", openai_client=AsyncOpenAI(base_url=wire.base_url, api_key="test"))
        agent = byref.agent(Agent(name="ops", model=model, tools=sdk_tools(s)))
        result = asyncio.run(Runner.run(agent, QUESTION,
                                        run_config=byref.run_config(NO_TRACES)))
    assert result.final_output.startswith("Done")
    assert s.rows_identical()
    sent = wire.sent()
    assert len(wire.bodies) == 4 and len(sent) < 60_000
    assert not any(r in sent for r in RECIPES)
    declared = {t["function"]["name"]: t["function"] for t in wire.bodies[0]["tools"]}
    assert "anyOf" in declared["generate_pdf"]["parameters"]["properties"]["rows"]


# -- MCP servers ---------------------------------------------------------------------------------
def test_an_mcp_servers_tool_takes_a_ref_through_byref() -> None:
    """A real MCP server (mcp-server-time, over stdio) behind the SDK's MCPServerStdio: its tool
    is listed into byref, and an argument written as a ref reaches the server as its value."""
    import sys

    from agents.mcp import MCPServerStdio

    server_bin = str(Path(sys.executable).parent / "mcp-server-time")
    if not Path(server_bin).exists():
        pytest.skip("mcp-server-time is not installed (the gateway-test extra)")

    @function_tool
    def office_zone() -> str:
        """The time zone of the office."""
        return "Europe/Paris"

    def ask(items: list[Any]) -> list[Any]:
        zone = {"$ref": {"type": "Message", "seq": 1, "part": 0}}
        return call("get_current_time", {"timezone": zone})(items)

    async def main() -> Any:
        byref = Byref()
        model = Scripted([call("office_zone", {}), ask, say("done")])
        async with MCPServerStdio(params={"command": server_bin, "args": []},
                                  cache_tools_list=True) as server:
            agent = await byref.agent_with_mcp(Agent(name="clock", model=model,
                                                     tools=[office_zone], mcp_servers=[server]))
            result = await Runner.run(agent, "What time is it at the office?",
                                      run_config=byref.run_config(NO_TRACES))
        return model, result

    model, result = asyncio.run(main())
    assert "get_current_time" in model.tools[0]
    schema_text = model.texts[0]
    assert '"timezone"' in schema_text and "anyOf" in schema_text
    answer = outputs(result.to_input_list())[-1]
    assert "Europe/Paris" in answer, answer
