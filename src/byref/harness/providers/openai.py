"""`OpenAIModel`: byref's `Model` port over the official `openai` SDK (the Responses API).

Owns the conversion at the OpenAI edge: declarations as function tools (rewritten schemas
untouched, `strict` off because a `$ref` alternative is not a strict-mode schema), calls and
results paired by `call_id`, arguments decoded from JSON text with every `$ref` intact, errors,
stop reasons, usage and streaming.

The law: the request is a pure function of the neutral `Request`; instructions and tools come
first and are byte-identical on every turn whose declarations did not change, so OpenAI's
automatic prefix cache keeps hitting (a `prompt_cache_key` derived from that prefix routes
every turn to the same cache). The transcript is sent whole each turn (`store` off): no hidden
server-side state. In native deferral mode the catalog is declared with `defer_loading: true`,
the search tool is declared as a client-executed `tool_search`, and byref's search results
travel as `tool_search_output` items carrying the found declarations.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from byref.harness.messages import (
    Block,
    OnDelta,
    Request,
    Response,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from byref.harness.providers.adapter import ProviderModel
from byref.harness.providers.deferral import NativeDeferral
from byref.harness.providers.setup import ProviderError, call_names, openai_client
from byref.jsonview import decode, dumps

KEY_VARIABLE = "OPENAI_API_KEY"


class OpenAIModel(ProviderModel):
    """An OpenAI model behind byref's harness. `turns` keeps each turn's `Usage`, in order."""

    provider = "openai"
    sdk_name = "openai"
    key_variable = KEY_VARIABLE

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        http_client: Any = None,
        base_url: str | None = None,
        max_output_tokens: int | None = None,
        stream: bool = False,
        deferral: NativeDeferral | None = None,
        cache_key: bool = True,
        max_retries: int = 2,
        timeout: float = 600.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model, client=client, stream=stream, extra=extra, build=functools.partial(
            openai_client, model_id=f"openai:{model}", key_variable=KEY_VARIABLE,
            api_key=api_key, base_url=base_url, http_client=http_client,
            max_retries=max_retries, timeout=timeout))
        self.max_output_tokens = max_output_tokens
        self.deferral = deferral
        self.cache_key = cache_key

    # -- the request ---------------------------------------------------------------------------
    def params(self, request: Request) -> dict[str, Any]:
        """The keyword arguments for `responses.create`, rendered from `request` alone."""
        declared = {str(t["name"]) for t in request.tools}
        if self.deferral is not None:
            self.deferral.check(declared)
        functions = {str(t["name"]): self._tool(t) for t in request.tools}
        tools = list(functions.values())
        params: dict[str, Any] = {"model": self.model}
        if request.system:
            params["instructions"] = request.system
        if tools:
            params["tools"] = tools
        params["input"] = self._items(request, declared, functions)
        params["store"] = False
        if self.max_output_tokens is not None:
            params["max_output_tokens"] = self.max_output_tokens
        if self.cache_key and (request.system or tools):
            prefix = dumps([request.system, tools]).encode()
            params["prompt_cache_key"] = "byref-" + hashlib.sha256(prefix).hexdigest()[:32]
        params.update(self.extra)
        return params

    def _tool(self, declaration: dict[str, Any]) -> dict[str, Any]:
        name = str(declaration["name"])
        if self.deferral is not None and name == self.deferral.search_tool:
            return {"type": "tool_search", "execution": "client",
                    "description": declaration.get("description", ""),
                    "parameters": declaration["input_schema"]}
        out: dict[str, Any] = {"type": "function", "name": name,
                               "description": declaration.get("description", ""),
                               "parameters": declaration["input_schema"], "strict": False}
        if self.deferral is not None and self.deferral.deferred(name):
            out["defer_loading"] = True
        return out

    def _items(self, request: Request, declared: set[str],
               functions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        search = self.deferral.search_tool if self.deferral is not None else None
        names = call_names(request) if search is not None else {}
        items: list[dict[str, Any]] = []
        for message in request.messages:
            for block in message.content:
                if block.type == "text":
                    if block.text:
                        items.append({"role": message.role, "content": block.text})
                elif block.type == "tool_use":
                    if search is not None and block.name == search:
                        items.append({"type": "tool_search_call", "call_id": block.id,
                                      "execution": "client", "status": "completed",
                                      "arguments": block.input})
                    else:
                        items.append({"type": "function_call", "call_id": block.id,
                                      "name": block.name, "arguments": _arguments(block.input)})
                elif search is not None and names.get(block.id) == search:
                    # A tool_search_call must be answered by a tool_search_output, even when
                    # the search failed or found nothing.
                    assert self.deferral is not None
                    found = self.deferral.found(block, names, declared) or []
                    items.append({"type": "tool_search_output", "call_id": block.id,
                                  "execution": "client", "status": "completed",
                                  "tools": [functions[n] for n in found]})
                else:
                    items.append({"type": "function_call_output", "call_id": block.id,
                                  "output": block.text})
        return items

    # -- the call ------------------------------------------------------------------------------
    async def _call(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        if not self.streams(on_delta):
            return await self.client.responses.create(**params)
        stream = StreamState(self, on_delta)
        async with await self.client.responses.create(**params, stream=True) as events:
            async for event in events:
                stream.add(event)
        return stream.final()

    def _call_blocking(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        if not self.streams(on_delta):
            return self.client.responses.create(**params)
        stream = StreamState(self, on_delta)
        with self.client.responses.create(**params, stream=True) as events:
            for event in events:
                stream.add(event)
        return stream.final()

    def convert(self, result: Any) -> Response:
        """An SDK `Response` as a neutral `Response` (text and tool calls; usage; stop reason)."""
        if result.status == "failed":
            error = getattr(result, "error", None)
            raise ProviderError(
                f"{self.provider} model {self.model!r} failed: "
                f"{getattr(error, 'message', None) or 'no reason given'}",
                provider=self.provider, model=self.model,
            )
        blocks: list[Block] = []
        refused = False
        for item in result.output:
            if item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        blocks.append(Block("text", text=part.text))
                    elif part.type == "refusal":
                        refused = True
                        blocks.append(Block("text", text=part.refusal))
            elif item.type == "function_call":
                blocks.append(Block("tool_use", id=item.call_id, name=item.name,
                                    input=_decode_arguments(item.arguments)))
            elif item.type == "tool_search_call" and self.deferral is not None:
                blocks.append(Block("tool_use", id=item.call_id or item.id,
                                    name=self.deferral.search_tool, input=item.arguments))
            # Reasoning items are not part of byref's neutral transcript.
        has_calls = any(b.type == "tool_use" for b in blocks)
        incomplete = getattr(result, "incomplete_details", None)
        raw = str(getattr(incomplete, "reason", "") or result.status or "")
        if result.status == "incomplete":
            if has_calls:
                raise ProviderError(
                    f"Model {self.model!r} stopped ({raw!r}) in the middle of a tool call, so its "
                    f"arguments may be cut short; raise max_output_tokens "
                    f"(now {self.max_output_tokens}).",
                    provider=self.provider, model=self.model,
                )
            stop = {"max_output_tokens": "max_tokens", "content_filter": "refusal"}.get(raw, raw)
        else:
            stop = "refusal" if refused else "tool_use" if has_calls else "end_turn"
        u = result.usage
        details = getattr(u, "input_tokens_details", None)
        cached = getattr(details, "cached_tokens", None)
        written = getattr(details, "cache_write_tokens", None)  # absent from older API versions
        usage = Usage(
            input_tokens=int(getattr(u, "input_tokens", 0) or 0),
            output_tokens=int(getattr(u, "output_tokens", 0) or 0),
            cache_read_tokens=None if cached is None else int(cached),
            cache_write_tokens=None if written is None else int(written),
            stop_reason=stop, provider_stop_reason=raw, model=str(result.model or self.model),
        )
        return Response(tuple(blocks), usage)


class StreamState:
    """A Responses stream: the final response it carries, and the text and function-call
    fragments on the way for a callback (calls numbered in the order their items open)."""

    def __init__(self, model: OpenAIModel, on_delta: OnDelta | None) -> None:
        self.model = model
        self.on_delta = on_delta
        self.result: Any = None
        self.calls: dict[int, int] = {}  # output index → call ordinal

    def add(self, event: Any) -> None:
        """Take one stream event: keep the final response, hand fragments to the callback."""
        kind = event.type
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.result = event.response
        elif kind == "error":
            raise self.model.stream_failed(event)
        elif self.on_delta is None:
            return
        elif kind == "response.output_text.delta" and event.delta:
            self.on_delta(TextDelta(event.delta))
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            ordinal = self.calls[event.output_index] = len(self.calls)
            self.on_delta(ToolCallDelta(ordinal, id=event.item.call_id, name=event.item.name))
        elif (kind == "response.function_call_arguments.delta" and event.delta
              and event.output_index in self.calls):
            self.on_delta(ToolCallDelta(self.calls[event.output_index], arguments=event.delta))

    def final(self) -> Any:
        """The final response the stream carried."""
        if self.result is None:
            raise self.model.stream_unfinished()
        return self.result


def _arguments(value: Any) -> str:
    # Arguments the model wrote as text that was not JSON are sent back exactly as written.
    return value if isinstance(value, str) else dumps(value)


def _decode_arguments(text: str) -> Any:
    """The call's arguments as JSON (every `$ref` object intact), or the raw text if not JSON;
    dispatch refuses a non-object input with a message the model can act on."""
    try:
        return decode(text) if text.strip() else {}
    except Exception:
        return text
