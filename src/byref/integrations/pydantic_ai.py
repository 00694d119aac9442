"""byref in pydantic-ai: one capability, `Byref`, on any `Agent` with any model.

`Agent(model, tools=[...], capabilities=[Byref()])` wraps the agent's assembled toolset
(`get_wrapper_toolset`) in `ByrefToolset`, a `WrapperToolset` that
- declares every tool with `$ref` alternatives on its arguments (pydantic-ai's own argument check
  is deferred until byref has resolved the refs to exact values, then runs as usual), adds
  read_json / query_json / read_result, and routes every call through byref's dispatcher: a large
  result comes back stored, as a preview with a ref, a binary as a marker;
- with `search=True` (or a `catalog=`), declares search_tools / activate_tool and only the
  working set, projected from the run's own message history (`RunContext.messages`);
- adds byref's sentence on references (and the discovery lines) to the instructions.
Where pydantic-ai has its own search hook, byref's engine fits behind it:
`ToolSearch(strategy=byref_search())`. With `budget=` (bytes), `prepare_model_request` fits
each request's messages: older settled results become exact-reread stubs, sticky, so the
prefix stays cacheable. A tool byref refuses
(or one that raised) answers as a failed tool return (`ToolFailed`), never a crash.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack, cast

from byref.discovery import Catalog, Searcher
from byref.discovery.page.search import MAX_ALSO
from byref.errors import MissingExtra, MisuseError
from byref.integrations.bridge import Bridge, BridgeOptions, Seen, bridge_from, plain_result
from byref.jsonview import dumps
from byref.tools import Payload, Tool

try:
    from pydantic_ai import ModelRetry, ToolFailed
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.tools import RunContext, ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("byref.integrations.pydantic_ai (pydantic-ai)", "pydantic-ai") from exc

if TYPE_CHECKING:
    from pydantic_ai.models import ModelRequestContext

__all__ = ["Byref", "ByrefToolset", "byref_search", "seen"]


@dataclass(kw_only=True)
class _ByrefTool(ToolsetTool[Any]):
    original: ToolsetTool[Any] | None = None
    """The wrapped toolset's own tool (None for a tool byref runs itself)."""


@dataclass
class ByrefToolset(WrapperToolset[Any]):
    """The agent's toolset with byref's dispatch, read tools and (optionally) search."""

    bridge: Bridge = field(default_factory=Bridge)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The wrapped toolset's tools with byref's schemas (pydantic-ai's own kinds pass
        through)."""
        inner = await self.wrapped.get_tools(ctx)
        # pydantic-ai's own kinds of tool (its tool search, output and external tools) keep
        # their typed returns: they pass through as they are.
        out: dict[str, ToolsetTool[Any]] = {n: t for n, t in inner.items() if _passes(t)}
        inner = {n: t for n, t in inner.items() if n not in out}
        for name, t in inner.items():
            self.bridge.adopt(name, t.tool_def.description or "",
                              dict(t.tool_def.parameters_json_schema), convert=_convert)
        surface = self.bridge.surface(inner, seen(ctx.messages))
        for d in surface.declarations:
            original = inner.get(d["name"])
            if original is not None:
                tool_def = dataclasses.replace(
                    original.tool_def, parameters_json_schema=d["input_schema"],
                    strict=None if original.tool_def.strict else original.tool_def.strict)
                retries = original.max_retries
            else:
                tool_def = ToolDefinition(name=d["name"], description=d["description"],
                                          parameters_json_schema=d["input_schema"])
                retries = 1
            # Arguments may be refs: pydantic-ai checks them only after byref resolved them.
            out[d["name"]] = _ByrefTool(toolset=self, tool_def=tool_def, max_retries=retries,
                                        args_validator=TOOL_SCHEMA_VALIDATOR, original=original)
        return out

    async def get_instructions(self, ctx: RunContext[Any]) -> Any:
        """The wrapped toolset's instructions plus byref's surface lines."""
        own = await self.wrapped.get_instructions(ctx)
        inner = {n: t for n, t in (await self.wrapped.get_tools(ctx)).items() if not _passes(t)}
        lines = self.bridge.surface(inner, seen(ctx.messages)).system_lines
        if own is None:
            return lines or None
        return [*([own] if isinstance(own, str) or not isinstance(own, Sequence) else own),
                *lines]

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any],
                        tool: ToolsetTool[Any]) -> Any:
        """Call a tool through byref's dispatch (refs resolved, result recorded and placed)."""
        if not isinstance(tool, _ByrefTool):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        original = tool.original
        control: list[BaseException] = []

        async def execute(args: dict[str, Any]) -> Any:
            assert original is not None
            validated = original.args_validator.validate_python(
                args, context=ctx.validation_context)
            try:
                if original.args_validator_func is not None:
                    checked = original.args_validator_func(ctx, **validated)
                    if hasattr(checked, "__await__"):
                        await checked
                return await self.wrapped.call_tool(name, validated, ctx, original)
            except (CallDeferred, ApprovalRequired) as e:
                control.append(e)  # pydantic-ai's control flow, not a failure: re-raised below
                raise
            except ModelRetry as e:
                raise RuntimeError(e.message) from e

        part = await self.bridge.call(
            ctx.tool_call_id or f"call_{name}", name, tool_args,
            execute if original is not None else None, siblings=_siblings(ctx))
        if control:
            raise control[0]
        text = part.rendered if part.rendered is not None else str(part.value)
        if part.is_error:
            raise ToolFailed(text)
        return text


@dataclass(init=False)
class Byref(AbstractCapability[Any]):
    """byref's economics for a pydantic-ai agent: `Agent(..., capabilities=[Byref()])`."""

    bridge: Bridge

    def __init__(self, *, bridge: Bridge | None = None,
                 **options: Unpack[BridgeOptions]) -> None:
        self.bridge = bridge_from(bridge, options)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """None: this capability holds live state and is not serializable."""
        return None  # holds live state (a transcript and a store), not spec-serializable

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        """Wrap `toolset` so its calls go through byref."""
        return ByrefToolset(toolset, bridge=self.bridge)

    async def prepare_model_request(self, ctx: RunContext[Any],
                                    request_context: ModelRequestContext) -> ModelRequestContext:
        """Fit the request's messages to the budget, replacing old tool results by refs."""
        messages = list(request_context.messages)
        fixed = _fixed_bytes(request_context)
        request_context.messages = self.bridge.fit(
            lambda stubs, note: _with_stubs(messages, stubs, note),
            lambda built: fixed + messages_bytes(built))
        return request_context


def _passes(tool: ToolsetTool[Any]) -> bool:
    return tool.tool_def.kind != "function" or tool.tool_def.tool_kind is not None


def byref_search(*, limit: int = 10) -> Callable[
        [RunContext[Any], Sequence[str], Sequence[ToolDefinition]], list[str]]:
    """byref's search engine behind pydantic-ai's native hook:
    `ToolSearch(strategy=byref_search())` ranks the deferred tools with byref's engine (exact
    names win; the model's several queries fused as other phrasings of one need) instead of
    keyword overlap."""
    searchers: dict[tuple[tuple[str, str], ...], Searcher] = {}

    def search(ctx: RunContext[Any], queries: Sequence[str],
               tools: Sequence[ToolDefinition]) -> list[str]:
        key = tuple((t.name, t.description or "") for t in tools)
        searcher = searchers.get(key)
        if searcher is None:
            searchers.clear()  # one deferred set at a time: the index follows it
            searcher = searchers[key] = Searcher(Catalog(
                Tool(name=t.name, description=t.description or "", fn=_listed,
                     input_schema=dict(t.parameters_json_schema)) for t in tools))
        # pydantic-ai's queries are the model's phrasings of what it looks for: fused as
        # search_tools' `also` fuses them (a tool several phrasings find ranks first), at most
        # 1 + MAX_ALSO at a time, later groups' names after earlier ones'.
        texts = [q for q in dict.fromkeys(queries) if q.strip()]
        names: list[str] = []
        for at in range(0, len(texts), 1 + MAX_ALSO):
            first, *also = texts[at:at + 1 + MAX_ALSO]
            for hit in searcher.search(first, limit=limit, also=also).results:
                if hit.name not in names:
                    names.append(hit.name)
        return names[:limit]

    return search


def _listed(**_: Any) -> Any:
    raise MisuseError("A tool indexed for pydantic-ai's ToolSearch runs in pydantic-ai.")


def seen(messages: Iterable[ModelMessage]) -> list[Seen]:
    """A pydantic-ai message history as the tool events the working set is projected from."""
    out: list[Seen] = []
    for message in messages:
        for part in message.parts:
            if isinstance(message, ModelResponse) and isinstance(part, ToolCallPart):
                out.append(Seen("call", part.tool_call_id, part.tool_name, _args(part)))
            elif isinstance(part, ToolReturnPart):
                out.append(Seen("result", part.tool_call_id,
                                is_error=part.outcome != "success"))
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                out.append(Seen("result", part.tool_call_id, is_error=True))
    return out


def _args(part: ToolCallPart) -> Any:
    try:
        return part.args_as_dict()
    except ValueError:
        return part.args


def _siblings(ctx: RunContext[Any]) -> list[tuple[str, str, Any]]:
    """The calls of the model response that made this one (its turn), when in the history."""
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelResponse):
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if any(p.tool_call_id == ctx.tool_call_id for p in calls):
            return [(p.tool_call_id, p.tool_name, _args(p)) for p in calls]
        return []
    return []


def _convert(value: Any) -> Any:
    """What a pydantic-ai tool returned, as byref records it: models and dataclasses as JSON
    values, `BinaryContent` and bytes as stored binaries."""
    from pydantic_ai.messages import BinaryContent

    if isinstance(value, BinaryContent):
        return Payload.from_bytes(value.data, value.media_type)
    if isinstance(value, bytes | bytearray | memoryview):
        return plain_result(value)
    if isinstance(value, str | int | float | bool | type(None) | dict | list | Payload):
        return value
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)


def _with_stubs(messages: list[ModelMessage], stubs: Mapping[str, str],
                note: str | None) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest) and any(
                isinstance(p, ToolReturnPart) and p.tool_call_id in stubs for p in message.parts):
            parts = [_stubbed(p, stubs[p.tool_call_id])
                     if isinstance(p, ToolReturnPart) and p.tool_call_id in stubs else p
                     for p in message.parts]
            message = dataclasses.replace(message, parts=parts)
        out.append(message)
    if note is not None and out and isinstance(out[-1], ModelRequest):
        last = out[-1]
        out[-1] = dataclasses.replace(last, parts=[*last.parts, UserPromptPart(note)])
    return out


def _stubbed(part: ToolReturnPart[Any], text: str) -> Any:
    # A copy (the persistent history keeps the real result); typed returns keep their class.
    return dataclasses.replace(cast(Any, part), content=text)


def messages_bytes(messages: Iterable[ModelMessage]) -> int:
    """UTF-8 bytes of what the model reads of `messages`: texts, call arguments, results."""
    total = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                total += len(part.tool_name.encode()) + len(part.args_as_json_str().encode())
            elif isinstance(part, ToolReturnPart):
                total += len(part.model_response_str().encode())
            else:
                content = getattr(part, "content", None)
                if isinstance(content, str):
                    total += len(content.encode())
                elif content is not None:
                    total += len(dumps(_jsonable(content)).encode())
    return total


def _jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)


def _fixed_bytes(request_context: ModelRequestContext) -> int:
    """The request's declarations and instructions, which fitting the messages cannot change."""
    params = request_context.model_request_parameters
    tools = [{"name": t.name, "description": t.description or "",
              "parameters": t.parameters_json_schema}
             for t in (*params.function_tools, *params.output_tools)]
    instructions = "".join(str(getattr(p, "content", "")) for p in
                           (getattr(params, "instruction_parts", None) or ()))
    return len(dumps(tools).encode()) + len(instructions.encode())
