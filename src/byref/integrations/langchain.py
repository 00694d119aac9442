"""byref in LangChain v1: one agent middleware, `ByrefMiddleware`, for `create_agent` with any
chat model.

`create_agent(model, tools=[...], middleware=[ByrefMiddleware()])`:
- `wrap_model_call` declares the agent's tools with `$ref` alternatives on every argument, adds
  read_json / query_json / read_result (and, with `search=True` or a `catalog=`, search_tools /
  activate_tool plus the working set projected from the request's own messages) as tool
  definitions the middleware answers itself, adds byref's lines to the system message, and with
  `budget=` (bytes) fits the messages: older settled results become exact-reread stubs, for this
  request only (the graph state keeps the real results);
- `wrap_tool_call` routes every call through byref's dispatcher: refs are resolved to exact
  values before LangChain runs the tool (its own argument check included), and the result comes
  back placed (stored with a preview) when large. A refusal or a tool error is a ToolMessage with
  status "error", never an exception out of the graph.
Sync (`invoke`) and async (`ainvoke`) agents both work; a LangChain tool's output reaches byref
as the ToolMessage content LangChain made of it (JSON text is read back as its value).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Unpack

from byref.errors import MissingExtra
from byref.harness.session import Surface
from byref.integrations.bridge import Bridge, BridgeOptions, Seen, bridge_from
from byref.jsonview import dumps
from byref.transcript import Part

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("byref.integrations.langchain (LangChain v1)", "langchain") from exc

__all__ = ["ByrefMiddleware", "seen"]


class ByrefMiddleware(AgentMiddleware[Any, Any, Any]):
    """byref's economics for a LangChain agent:
    `create_agent(model, tools, middleware=[ByrefMiddleware()])`."""

    def __init__(self, *, bridge: Bridge | None = None,
                 **options: Unpack[BridgeOptions]) -> None:
        super().__init__()
        self.bridge = bridge_from(bridge, options)

    # -- the model's side ----------------------------------------------------------------------
    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], Any]) -> Any:
        """Send the model request with old tool results replaced by refs to fit the budget."""
        return handler(self._request(request))

    async def awrap_model_call(self, request: ModelRequest[Any],
                               handler: Callable[[ModelRequest[Any]], Awaitable[Any]]) -> Any:
        """The async form of `wrap_model_call`."""
        return await handler(self._request(request))

    def _request(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        own: list[BaseTool] = [t for t in request.tools if isinstance(t, BaseTool)]
        for t in own:
            function = convert_to_openai_tool(t)["function"]
            self.bridge.adopt(t.name, function.get("description", ""),
                              dict(function.get("parameters") or {"type": "object",
                                                                   "properties": {}}),
                              convert=_from_content)
        surface = self.bridge.surface([t.name for t in own], seen(request.messages))
        # Tools given as dicts (provider-native ones) pass through untouched.
        tools: list[BaseTool | dict[str, Any]] = [
            *(t for t in request.tools if isinstance(t, dict)), *_declared(surface)]
        system = _system(request.system_message, surface.system_lines)
        messages = list(request.messages)
        fixed = len(dumps([*_declared(surface)]).encode()) + len(
            str(system.content if system is not None else "").encode())
        fitted = self.bridge.fit(lambda stubs, note: _with_stubs(messages, stubs, note),
                                 lambda built: fixed + messages_bytes(built))
        return request.override(tools=tools, system_message=system, messages=fitted)

    # -- the tools' side -----------------------------------------------------------------------
    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
                       ) -> ToolMessage | Command[Any]:
        """Run the tool call through byref's dispatch (refs resolved, results recorded and
        placed)."""
        async def execute(args: dict[str, Any]) -> Any:
            return _outcome(handler(request.override(tool_call={**request.tool_call,
                                                                "args": args})), control)

        control: list[Command[Any]] = []
        part = _run(lambda: self._call(request, execute))
        return control[0] if control else _message(request, part)

    async def awrap_tool_call(
            self, request: ToolCallRequest,
            handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        """The async form of `wrap_tool_call`."""
        async def execute(args: dict[str, Any]) -> Any:
            return _outcome(await handler(request.override(tool_call={**request.tool_call,
                                                                      "args": args})), control)

        control: list[Command[Any]] = []
        part = await self._call(request, execute)
        return control[0] if control else _message(request, part)

    async def _call(self, request: ToolCallRequest,
                    execute: Callable[[dict[str, Any]], Awaitable[Any]]) -> Part:
        call = request.tool_call
        adopted = request.tool is not None and not self.bridge.is_byref(call["name"])
        return await self.bridge.call(str(call.get("id") or f"call_{call['name']}"),
                                      call["name"], call.get("args"),
                                      execute if adopted else None,
                                      siblings=_siblings(request.state, call.get("id")))


def _run(make: Callable[[], Awaitable[Part]]) -> Part:
    """A sync tool call's dispatch: on its own event loop (in a thread if this one has one)."""
    async def main() -> Part:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def seen(messages: Iterable[BaseMessage]) -> list[Seen]:
    """LangChain messages as the tool events the working set is projected from."""
    out: list[Seen] = []
    for message in messages:
        if isinstance(message, AIMessage):
            out.extend(Seen("call", str(c.get("id")), c["name"], c.get("args"))
                       for c in message.tool_calls)
        elif isinstance(message, ToolMessage):
            out.append(Seen("result", message.tool_call_id, is_error=message.status == "error"))
    return out


def _declared(surface: Surface) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": d["name"], "description": d["description"],
                                              "parameters": d["input_schema"]}}
            for d in surface.declarations]


def _system(system: SystemMessage | None, lines: Sequence[str]) -> SystemMessage | None:
    if not lines:
        return system
    extra = "\n\n".join(lines)
    if system is None:
        return SystemMessage(extra)
    return SystemMessage(f"{system.text}\n\n{extra}")


def _siblings(state: Any, call_id: Any) -> list[tuple[str, str, Any]]:
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(
        state, "messages", [])
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = message.tool_calls
            if any(c.get("id") == call_id for c in calls):
                return [(str(c.get("id")), c["name"], c.get("args")) for c in calls]
            return []
    return []


def _outcome(result: ToolMessage | Command[Any], control: list[Command[Any]]) -> Any:
    """What LangChain's run of the tool produced, as byref records it."""
    if isinstance(result, Command):
        control.append(result)  # the graph's control flow, not a result: handed back as is
        return "(a command for the agent graph)"
    if result.status == "error":
        raise RuntimeError(result.text)
    return result.artifact if result.artifact is not None else result.content


def _from_content(value: Any) -> Any:
    """A ToolMessage's content: JSON text is the tool's value again (LangChain serialized it)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, bytes | bytearray):
        from byref.integrations.bridge import plain_result

        return plain_result(value)
    return value


def _message(request: ToolCallRequest, part: Part) -> ToolMessage:
    text = part.rendered if part.rendered is not None else str(part.value)
    return ToolMessage(content=text, tool_call_id=str(request.tool_call.get("id")),
                       name=request.tool_call["name"],
                       status="error" if part.is_error else "success")


def _with_stubs(messages: list[AnyMessage], stubs: Mapping[str, str],
                note: str | None) -> list[AnyMessage]:
    out: list[AnyMessage] = [
        m.model_copy(update={"content": stubs[m.tool_call_id]})
        if isinstance(m, ToolMessage) and m.tool_call_id in stubs else m for m in messages]
    if note is not None:
        out.append(HumanMessage(note))
    return out


def messages_bytes(messages: Iterable[BaseMessage]) -> int:
    """UTF-8 bytes of what the model reads of `messages`: texts, call arguments, results."""
    total = 0
    for message in messages:
        total += len(message.text.encode())
        if isinstance(message, AIMessage):
            total += sum(len(c["name"].encode()) + len(dumps(c.get("args")).encode())
                         for c in message.tool_calls)
    return total
