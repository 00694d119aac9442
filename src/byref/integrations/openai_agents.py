"""byref in the OpenAI Agents SDK: `Byref` wraps an agent's function tools and filters the model
input, for any `Model` the SDK runs.

    byref = Byref()
    agent = byref.agent(Agent(name="ops", tools=[export_orders, total]))
    await Runner.run(agent, "…", run_config=byref.run_config())

- `byref.agent(agent)` (or `byref.tools(tools)`) gives each `FunctionTool` a schema whose every
  argument also accepts a `$ref` and an `on_invoke_tool` that goes through byref's dispatcher:
  refs are resolved to exact values before the SDK parses and runs the call, and a large or
  binary result comes back stored, as a preview or a marker with a ref. The readers
  (read_json, query_json, read_result) are added; with `search=True` or a `catalog=`,
  search_tools / activate_tool too, and a catalog tool is enabled (`is_enabled`) only while the
  working set holds it. The SDK's tool hooks do not see the conversation, so the working set is
  projected from byref's own record of the calls it dispatched.
- `byref.run_config()` sets `RunConfig.call_model_input_filter`: byref's lines join the
  instructions and, with `budget=` (bytes), older settled `function_call_output`s become
  exact-reread stubs in the input sent (the run's items keep the real results).
`await byref.agent_with_mcp(agent)` brings the agent's MCP servers' tools in the same way;
hosted tools pass through untouched. The SDK runs a turn's calls concurrently
without showing a call its siblings, so byref records them one after another.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

from byref.errors import MissingExtra
from byref.integrations.bridge import Bridge, BridgeOptions, Seen, bridge_from, plain_result
from byref.jsonview import dumps
from byref.tools import Tool as ByrefTool

try:
    from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Tool
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("byref.integrations.openai_agents (the OpenAI Agents SDK)",
                       "openai-agents") from exc

__all__ = ["Byref", "seen"]


class Byref:
    """byref's economics for an Agents SDK agent: `byref.agent(agent)` and
    `Runner.run(..., run_config=byref.run_config())`."""

    def __init__(self, *, bridge: Bridge | None = None,
                 **options: Unpack[BridgeOptions]) -> None:
        self.bridge = bridge_from(bridge, options)
        self._visible: list[str] = []
        self._declared: tuple[int | None, frozenset[str]] | None = None

    # -- tools ---------------------------------------------------------------------------------
    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A clone of `agent` whose tools go through byref (with byref's own tools added)."""
        return agent.clone(tools=self.tools(agent.tools))

    async def agent_with_mcp(self, agent: Agent[Any]) -> Agent[Any]:
        """`agent(agent)` with its MCP servers' tools too: they are listed now (call it with the
        servers connected, inside `async with server:`) and go through byref like function
        tools, so their arguments accept refs and their large answers are stored."""
        from agents.mcp import MCPUtil

        listed = await MCPUtil.get_all_function_tools(
            agent.mcp_servers, False, RunContextWrapper(context=None), agent)
        return agent.clone(tools=self.tools([*agent.tools, *listed]), mcp_servers=[])

    def tools(self, tools: Sequence[Tool]) -> list[Tool]:
        """`tools` through byref, plus the readers (and search tools, and the catalog's)."""
        out: list[Tool] = []
        for t in tools:
            out.append(self._adopt(t) if isinstance(t, FunctionTool) else t)
        self._visible = [t.name for t in tools if isinstance(t, FunctionTool)]
        out.extend(self._own(t) for t in self.bridge.own_tools())
        return out

    def _adopt(self, original: FunctionTool) -> FunctionTool:
        tool = self.bridge.adopt(original.name, original.description,
                                 dict(original.params_json_schema), convert=plain_result)

        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            async def execute(args: dict[str, Any]) -> Any:
                return await original.on_invoke_tool(ctx, json.dumps(args))

            return await self._invoke(ctx, arguments, execute)

        return dataclasses.replace(
            original, params_json_schema=self._schema(tool), on_invoke_tool=invoke,
            strict_json_schema=False, is_enabled=self._enabled(original.name, original))

    def _own(self, tool: ByrefTool) -> FunctionTool:
        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            return await self._invoke(ctx, arguments, None)

        return FunctionTool(name=tool.name, description=tool.description,
                            params_json_schema=self._schema(tool), on_invoke_tool=invoke,
                            strict_json_schema=False, is_enabled=self._enabled(tool.name))

    def _schema(self, tool: ByrefTool) -> dict[str, Any]:
        if self.bridge.policy.refs and tool.name not in {"search_tools", "activate_tool"}:
            return dict(tool.declaration()["input_schema"])
        return dict(tool.input_schema)

    async def _invoke(self, ctx: ToolContext[Any], arguments: str, execute: Any) -> str:
        try:
            args: Any = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            args = arguments  # not JSON: dispatch refuses it, saying so
        part = await self.bridge.call(ctx.tool_call_id, ctx.tool_name, args, execute)
        return part.rendered if part.rendered is not None else str(part.value)

    def _enabled(self, name: str, original: FunctionTool | None = None) -> Any:
        # Without search only the readers vary: each is offered once a stored result needs it.
        if self.bridge.discovery is None and name not in {t.name for t in self.bridge.builtins}:
            return original.is_enabled if original is not None else True

        def enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            return name in self.declared()

        return enabled

    def declared(self) -> frozenset[str]:
        """Names declared for the next turn (with search: the scaffolding plus the working set
        projected from byref's record), recomputed only when the record grew."""
        key = self.bridge.transcript.last_seq
        if self._declared is None or self._declared[0] != key:
            self.bridge.settle()
            surface = self.bridge.surface(self._visible, self.bridge.recorded())
            self._declared = (key, frozenset(d["name"] for d in surface.declarations))
        return self._declared[1]

    # -- the model input -----------------------------------------------------------------------
    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """`base` (or a new `RunConfig`) with byref's `call_model_input_filter`."""
        return dataclasses.replace(base or RunConfig(),
                                   call_model_input_filter=self.call_model_input_filter)

    def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """byref's lines after the instructions; with a budget, the input fitted to it."""
        surface = self.bridge.surface(self._visible, self.bridge.recorded())
        given = [data.model_data.instructions] if data.model_data.instructions else []
        instructions = "\n\n".join([*given, *surface.system_lines])
        items = list(data.model_data.input)
        fixed = len(instructions.encode()) + len(dumps([
            {"name": t.name, "description": t.description, "parameters": t.params_json_schema}
            for t in data.agent.tools if isinstance(t, FunctionTool)]).encode())
        fitted = self.bridge.fit(lambda stubs, note: _with_stubs(items, stubs, note),
                                 lambda built: fixed + items_bytes(built))
        return ModelInputData(input=fitted, instructions=instructions or None)


def seen(items: Iterable[Any]) -> list[Seen]:
    """Responses-API input items as the tool events a working set is projected from."""
    out: list[Seen] = []
    for item in items:
        kind = _get(item, "type")
        if kind == "function_call":
            raw = _get(item, "arguments") or "{}"
            try:
                args = json.loads(raw)
            except ValueError:
                args = raw
            out.append(Seen("call", str(_get(item, "call_id")), str(_get(item, "name")), args))
        elif kind == "function_call_output":
            out.append(Seen("result", str(_get(item, "call_id"))))
    return out


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def _with_stubs(items: list[Any], stubs: Mapping[str, str], note: str | None) -> list[Any]:
    out = [{**item, "output": stubs[item["call_id"]]}
           if isinstance(item, Mapping) and item.get("type") == "function_call_output"
           and item.get("call_id") in stubs else item for item in items]
    if note is not None:
        out.append({"role": "user", "content": note})
    return out


def items_bytes(items: Iterable[Any]) -> int:
    """UTF-8 bytes of what the model reads of input items: texts, call arguments, outputs."""
    total = 0
    for item in items:
        value = item if isinstance(item, Mapping) else getattr(item, "model_dump", dict)()
        for key in ("content", "arguments", "output", "name"):
            got = value.get(key) if isinstance(value, Mapping) else None
            if isinstance(got, str):
                total += len(got.encode())
            elif got is not None:
                total += len(dumps(got).encode())
    return total
