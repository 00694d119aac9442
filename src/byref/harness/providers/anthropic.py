"""`AnthropicModel`: byref's `Model` port over the official `anthropic` SDK (Messages API).

Owns the conversion at the Anthropic edge: declarations (rewritten schemas, passed through
untouched), tool calls and results with their ids, errors, stop reasons, usage and streaming.

The law: the request is a pure function of the neutral `Request`, and everything before the
stable cache breakpoint (tools, then the stable system text) is byte-identical on every turn
whose declarations did not change. The breakpoint sits after that prefix, never inside it; a
second, rolling breakpoint on the newest message lets the conversation itself be read from cache.
In native deferral mode the whole catalog is declared with `defer_loading: true` and byref's
search results travel as `tool_reference` blocks, so activating a tool changes nothing cached.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any, Literal

from byref.harness.messages import (
    Block,
    Delta,
    OnDelta,
    Request,
    Response,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from byref.harness.providers.adapter import ProviderModel
from byref.harness.providers.deferral import NativeDeferral
from byref.harness.providers.setup import (
    MissingKeyError,
    ProviderError,
    call_names,
    client_class,
    split_system,
)

KEY_VARIABLES = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
EMPTY_TEXT = "(no text)"
"""Stands in for an empty text turn: the Messages API rejects empty text blocks."""

_STOP = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens",
         "stop_sequence": "stop_sequence", "pause_turn": "pause_turn", "refusal": "refusal",
         "model_context_window_exceeded": "max_tokens"}


class AnthropicModel(ProviderModel):
    """A Claude model behind byref's harness. `turns` keeps each turn's `Usage`, in order."""

    provider = "anthropic"
    sdk_name = "anthropic"
    key_variable = KEY_VARIABLES[0]

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        api_key: str | None = None,
        http_client: Any = None,
        max_tokens: int = 8192,
        stream: bool = False,
        deferral: NativeDeferral | None = None,
        cache: bool = True,
        cache_conversation: bool = True,
        cache_ttl: Literal["5m", "1h"] | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        def build(sdk: ModuleType) -> Any:
            if api_key is None and not any(os.environ.get(v, "").strip() for v in KEY_VARIABLES):
                raise MissingKeyError(
                    f"No API key for model {'anthropic:' + model!r}: set {KEY_VARIABLES[0]} in "
                    "the environment (or pass api_key=... or a ready client).",
                    KEY_VARIABLES[0],
                )
            options: dict[str, Any] = {"max_retries": max_retries, "timeout": timeout}
            if api_key is not None:
                options["api_key"] = api_key
            if http_client is not None:
                options["http_client"] = http_client
            return client_class(sdk, "Anthropic", http_client)(**options)

        super().__init__(model, client=client, stream=stream, extra=extra, build=build)
        self.max_tokens = max_tokens
        self.deferral = deferral
        self.cache = cache
        self.cache_conversation = cache_conversation
        self.cache_control: dict[str, Any] = {"type": "ephemeral"}
        if cache_ttl is not None:
            self.cache_control["ttl"] = cache_ttl

    # -- the request ---------------------------------------------------------------------------
    def params(self, request: Request) -> dict[str, Any]:
        """The keyword arguments for `messages.create`, rendered from `request` alone."""
        declared = {str(t["name"]) for t in request.tools}
        if self.deferral is not None:
            self.deferral.check(declared)
        tools = [self._tool(t) for t in request.tools]
        stable, varying = split_system(request.system)
        system: list[dict[str, Any]] = [
            {"type": "text", "text": text} for text in (stable, varying) if text]
        messages = self._messages(request, declared)
        if self.cache:
            # Anthropic caches tools → system → messages in that order: one breakpoint at the
            # end of the stable system text covers every declaration too.
            if stable:
                system[0]["cache_control"] = self.cache_control
            elif tools:
                tools[-1]["cache_control"] = self.cache_control
            if self.cache_conversation and messages:
                messages[-1]["content"][-1]["cache_control"] = self.cache_control
        params: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens,
                                  "messages": messages}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = tools
        params.update(self.extra)
        return params

    def _tool(self, declaration: dict[str, Any]) -> dict[str, Any]:
        # A fresh dict per turn: the cached schema object inside is shared and never mutated.
        out = {"name": declaration["name"], "description": declaration.get("description", ""),
               "input_schema": declaration["input_schema"]}
        if self.deferral is not None and self.deferral.deferred(str(declaration["name"])):
            out["defer_loading"] = True
        return out

    def _messages(self, request: Request, declared: set[str]) -> list[dict[str, Any]]:
        calls = call_names(request) if self.deferral is not None else {}
        out: list[dict[str, Any]] = []
        for message in request.messages:
            content = [self._block(b, calls, declared) for b in message.content]
            content = [c for c in content if c is not None] or [
                {"type": "text", "text": EMPTY_TEXT}]
            if out and out[-1]["role"] == message.role:
                # The API wants alternating roles; two user turns in a row become one.
                out[-1]["content"].extend(content)
            else:
                out.append({"role": message.role, "content": content})
        return out

    def _block(self, block: Block, calls: dict[str, str],
               declared: set[str]) -> dict[str, Any] | None:
        if block.type == "text":
            return {"type": "text", "text": block.text} if block.text else None
        if block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {"value": block.input}
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id}
        found = (self.deferral.found(block, calls, declared)
                 if self.deferral is not None else None)
        if found:
            out["content"] = [{"type": "tool_reference", "tool_name": n} for n in found]
        else:
            out["content"] = block.text
        if block.is_error:
            out["is_error"] = True
        return out

    # -- the call ------------------------------------------------------------------------------
    async def _call(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        if not self.streams(on_delta):
            return await self.client.messages.create(**params)
        fragments = StreamDeltas(on_delta)
        async with self.client.messages.stream(**params) as events:
            async for event in events:
                fragments.add(event)
            return await events.get_final_message()

    def _call_blocking(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        if not self.streams(on_delta):
            return self.client.messages.create(**params)
        fragments = StreamDeltas(on_delta)
        with self.client.messages.stream(**params) as events:
            for event in events:
                fragments.add(event)
            return events.get_final_message()

    def convert(self, message: Any) -> Response:
        """An SDK `Message` as a neutral `Response` (text and tool calls; usage; stop reason)."""
        blocks: list[Block] = []
        for content in message.content:
            if content.type == "text":
                blocks.append(Block("text", text=content.text))
            elif content.type == "tool_use":
                blocks.append(Block("tool_use", id=content.id, name=content.name,
                                    input=content.input))
            # Thinking and server-tool blocks have no place in byref's neutral transcript.
        raw_stop = message.stop_reason or ""
        if raw_stop in ("max_tokens", "model_context_window_exceeded") and any(
                b.type == "tool_use" for b in blocks):
            raise ProviderError(
                f"Model {self.model!r} stopped ({raw_stop!r}) in the middle of a tool call, so its "
                f"arguments may be cut short; raise max_tokens (now {self.max_tokens}).",
                provider=self.provider, model=self.model,
            )
        u = message.usage
        read = int(getattr(u, "cache_read_input_tokens", None) or 0)
        written = int(getattr(u, "cache_creation_input_tokens", None) or 0)
        usage = Usage(
            input_tokens=int(u.input_tokens) + read + written,
            output_tokens=int(u.output_tokens),
            cache_read_tokens=read,
            cache_write_tokens=written,
            stop_reason=_STOP.get(raw_stop, raw_stop),
            provider_stop_reason=raw_stop,
            model=str(getattr(message, "model", self.model)),
        )
        return Response(tuple(blocks), usage)


class StreamDeltas:
    """Stream events → `TextDelta` / `ToolCallDelta` for a callback; tool calls are numbered
    in the order their content blocks open."""

    def __init__(self, on_delta: OnDelta | None) -> None:
        self.on_delta = on_delta
        self.calls: dict[int, int] = {}  # content block index → call ordinal

    def add(self, event: Any) -> None:
        """Hand one stream event's fragment, if it carries one, to the callback."""
        if self.on_delta is None:
            return
        delta: Delta | None = None
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            ordinal = self.calls[event.index] = len(self.calls)
            block = event.content_block
            delta = ToolCallDelta(ordinal, id=block.id, name=block.name)
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta" and event.delta.text:
                delta = TextDelta(event.delta.text)
            elif (event.delta.type == "input_json_delta" and event.delta.partial_json
                  and event.index in self.calls):
                delta = ToolCallDelta(self.calls[event.index],
                                      arguments=event.delta.partial_json)
        if delta is not None:
            self.on_delta(delta)
