"""`OpenAIChatModel`: byref's `Model` port over the `openai` SDK's Chat Completions API.

Chat Completions is what OpenAI-compatible servers speak (vLLM, Ollama, llama.cpp's server,
LiteLLM); `base_url` points the adapter at one, and such a server needs no key. Owns the
conversion at that edge: the system text as the first message, declarations as function tools
(rewritten schemas untouched), calls (parallel ones too) and `role: "tool"` results paired by
`tool_call_id`, arguments decoded from JSON text with every `$ref` intact, usage, stop reasons,
and streams assembled from their text and tool-call fragments.

The law: the request is a pure function of the neutral `Request` (system and tools first,
byte-identical while the declarations do not change), and every conversion is a pure function
of SDK objects: `chat_messages`, `chat_tool`, `completion_turn`, `ChunkAssembler` and
`Turn.response`. Only `respond` touches the client (`AsyncOpenAI`, awaited; a blocking `OpenAI`
client runs in a worker thread), feeding the same functions either way.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass, field
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
from byref.harness.providers.setup import NO_KEY, ProviderError, openai_client
from byref.jsonview import decode, dumps

KEY_VARIABLE = "OPENAI_API_KEY"
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
__all__ = ["NO_KEY", "ChunkAssembler", "OpenAIChatModel", "Turn", "chat_messages", "chat_tool",
           "completion_turn"]

_STOP = {"length": "max_tokens", "content_filter": "refusal"}


class OpenAIChatModel(ProviderModel):
    """A Chat Completions model behind byref's harness. `turns` keeps each turn's `Usage`."""

    provider = "openai-chat"
    sdk_name = "openai"
    key_variable = KEY_VARIABLE

    def __init__(
        self,
        model: str,
        *,
        client: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: Any = None,
        max_output_tokens: int | None = None,
        stream: bool = False,
        cache_key: bool | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        extra: dict[str, Any] | None = None,
    ) -> None:
        # The SDK reads OPENAI_BASE_URL itself; reading it here too lets a local server go keyless.
        base_url = base_url or os.environ.get(BASE_URL_VARIABLE, "").strip() or None
        super().__init__(model, client=client, stream=stream, extra=extra, build=functools.partial(
            openai_client, model_id=f"openai-chat:{model}", key_variable=KEY_VARIABLE,
            api_key=api_key, base_url=base_url, http_client=http_client,
            max_retries=max_retries, timeout=timeout))
        host = getattr(getattr(self.client, "base_url", None), "host", None)
        self.compatible = host not in (None, "api.openai.com")
        """Not OpenAI's own endpoint: only the fields every compatible server knows are sent."""
        self.max_output_tokens = max_output_tokens
        # `prompt_cache_key` is OpenAI's; a compatible server may reject an unknown field.
        self.cache_key = (not self.compatible) if cache_key is None else cache_key

    # -- the request ---------------------------------------------------------------------------
    def params(self, request: Request) -> dict[str, Any]:
        """The keyword arguments for `chat.completions.create`, rendered from `request` alone."""
        tools = [chat_tool(t) for t in request.tools]
        messages = chat_messages(request)
        if self.compatible:
            # llama-cpp-python's server refuses a null content beside tool calls (its schema
            # wants a string); an empty one means the same to every server.
            messages = [{**m, "content": ""} if "content" in m and m["content"] is None else m
                        for m in messages]
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            params["tools"] = tools
        if self.max_output_tokens is not None:
            # OpenAI deprecated max_tokens (its reasoning models refuse it); servers know it.
            name = "max_tokens" if self.compatible else "max_completion_tokens"
            params[name] = self.max_output_tokens
        if self.cache_key and (request.system or tools):
            prefix = dumps([request.system, tools]).encode()
            params["prompt_cache_key"] = "byref-" + hashlib.sha256(prefix).hexdigest()[:32]
        if self.stream:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
        params.update(self.extra)
        return params

    # -- the call ------------------------------------------------------------------------------
    async def _call(self, params: dict[str, Any], on_delta: OnDelta | None) -> Turn | None:
        params = _streamed(params, on_delta)
        if not params.get("stream"):
            return completion_turn(await self.client.chat.completions.create(**params))
        assembler = ChunkAssembler(on_delta)
        async with await self.client.chat.completions.create(**params) as chunks:
            async for chunk in chunks:
                assembler.add(chunk)
        return assembler.turn()

    def _call_blocking(self, params: dict[str, Any], on_delta: OnDelta | None) -> Turn | None:
        params = _streamed(params, on_delta)
        if not params.get("stream"):
            return completion_turn(self.client.chat.completions.create(**params))
        assembler = ChunkAssembler(on_delta)
        with self.client.chat.completions.create(**params) as chunks:
            for chunk in chunks:
                assembler.add(chunk)
        return assembler.turn()

    def convert(self, turn: Turn | None) -> Response:
        """One assembled turn as a neutral `Response`, or the error saying why there is none."""
        if turn is None:
            what = ("stream ended without a finish reason" if self.stream
                    else "answer held no choice")
            raise ProviderError(
                f"The {self.provider} {what} for model {self.model!r}.",
                provider=self.provider, model=self.model, retryable=True,
            )
        return turn.response(provider=self.provider, model=self.model,
                             max_output_tokens=self.max_output_tokens)


def _streamed(params: dict[str, Any], on_delta: OnDelta | None) -> dict[str, Any]:
    if on_delta is not None and not params.get("stream"):
        # A callback wants the fragments as they arrive.
        params = {**params, "stream": True, "stream_options": {"include_usage": True}}
    return params


# -- the request, as pure functions ------------------------------------------------------------
def chat_tool(declaration: dict[str, Any]) -> dict[str, Any]:
    """A byref declaration as a function tool. `strict` is left out (off by default): a `$ref`
    alternative is not a strict-mode schema, and some servers reject the field."""
    return {"type": "function", "function": {
        "name": declaration["name"], "description": declaration.get("description", ""),
        "parameters": declaration["input_schema"]}}


def chat_messages(request: Request) -> list[dict[str, Any]]:
    """The system text, then the conversation; tool results travel as `role: "tool"` messages."""
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        texts = [b.text for b in message.content if b.type == "text" and b.text]
        text = "\n\n".join(texts)
        if message.role == "assistant":
            calls = [{"id": b.id, "type": "function",
                      "function": {"name": b.name, "arguments": arguments_text(b.input)}}
                     for b in message.content if b.type == "tool_use"]
            # Content may be null only beside tool calls; that is how the API returns it too.
            entry: dict[str, Any] = {"role": "assistant", "content": text or (None if calls
                                                                              else "")}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        results = [{"role": "tool", "tool_call_id": b.id, "content": b.text}
                   for b in message.content if b.type == "tool_result"]
        # Tool messages must directly follow the assistant turn that called them.
        out.extend(results)
        if text or not results:
            out.append({"role": "user", "content": text})
    return out


def arguments_text(value: Any) -> str:
    # Arguments the model wrote as text that was not JSON are sent back exactly as written.
    return value if isinstance(value, str) else dumps(value)


def decode_arguments(raw: Any) -> Any:
    """The call's arguments as JSON (every `$ref` object intact), or the raw text if not JSON;
    dispatch refuses a non-object input with a message the model can act on."""
    if not isinstance(raw, str):  # a server that sends an object instead of JSON text
        return {} if raw is None else raw
    try:
        return decode(raw) if raw.strip() else {}
    except Exception:
        return raw


# -- the response, as pure functions -----------------------------------------------------------
@dataclass
class Turn:
    """What byref reads of one completion, whether it arrived whole or as a stream."""

    finish: str
    text: str = ""
    refusal: str = ""
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    """(id, name, raw arguments) in the order the model wrote them."""
    usage: Any = None
    model: str = ""
    id: str = ""

    def response(self, *, provider: str, model: str,
                 max_output_tokens: int | None = None) -> Response:
        """Take one stream chunk: join its text and call fragments, keep usage and finish."""
        blocks: list[Block] = []
        if self.text:
            blocks.append(Block("text", text=self.text))
        if self.refusal:
            blocks.append(Block("text", text=self.refusal))
        for i, (call_id, name, raw) in enumerate(self.calls):
            # Some servers leave ids out; results are paired by id, so each call needs one.
            blocks.append(Block("tool_use", id=call_id or f"{self.id or 'call'}-{i}", name=name,
                                input=decode_arguments(raw)))
        if self.finish == "length" and self.calls:
            raise ProviderError(
                f"Model {model!r} stopped ('length') in the middle of a tool call, so its "
                f"arguments may be cut short; raise max_output_tokens (now {max_output_tokens}).",
                provider=provider, model=model,
            )
        # Servers differ on the finish reason beside tool calls ("stop" or "tool_calls").
        stop = ("refusal" if self.refusal else "tool_use" if self.calls
                else _STOP.get(self.finish, "end_turn"))
        u = self.usage
        details = getattr(u, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None)
        written = getattr(details, "cache_write_tokens", None)
        usage = Usage(
            input_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(u, "completion_tokens", 0) or 0),
            cache_read_tokens=None if cached is None else int(cached),
            cache_write_tokens=None if written is None else int(written),
            stop_reason=stop, provider_stop_reason=self.finish, model=self.model or model,
        )
        return Response(tuple(blocks), usage)


def completion_turn(result: Any) -> Turn | None:
    """A whole SDK `ChatCompletion` as a `Turn` (its first choice; byref never asks for more),
    or `None` when it holds no choice."""
    choice = next((c for c in result.choices or () if c.index == 0), None)
    if choice is None:
        return None
    message = choice.message
    calls = [(str(c.id or ""), str(c.function.name or ""), c.function.arguments)
             for c in message.tool_calls or () if getattr(c, "function", None) is not None]
    return Turn(finish=str(choice.finish_reason or ""), text=message.content or "",
                refusal=getattr(message, "refusal", None) or "", calls=calls,
                usage=result.usage, model=str(result.model or ""), id=str(result.id or ""))


class ChunkAssembler:
    """Stream chunks → one `Turn`: text and refusal deltas joined, each call's argument
    fragments joined under its index, the last usage kept (the final chunk has no choices)."""

    def __init__(self, on_delta: OnDelta | None = None) -> None:
        self.on_delta = on_delta
        """Given, it receives each text and tool-call fragment as it is added."""
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[Any, tuple[list[str], list[str], list[str]]] = {}
        self.last: Any = 0
        self.finish: str | None = None
        self.usage: Any = None
        self.model = ""
        self.id = ""

    def add(self, chunk: Any) -> None:
        """The assembled turn, or `None` when the stream never said why it finished."""
        self.model = self.model or str(chunk.model or "")
        self.id = self.id or str(chunk.id or "")
        if chunk.usage is not None:
            self.usage = chunk.usage
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.text.append(delta.content)
                if self.on_delta is not None:
                    self.on_delta(TextDelta(delta.content))
            if getattr(delta, "refusal", None):
                self.refusal.append(delta.refusal)
            for call in delta.tool_calls or ():
                # A server that leaves out the index is keyed by id, else by the call before.
                key = call.index if call.index is not None else (call.id or self.last)
                self.last = key
                ordinal = list(self.calls).index(key) if key in self.calls else len(self.calls)
                ids, names, fragments = self.calls.setdefault(key, ([], [], []))
                new_id = new_name = piece = ""
                if call.id and not ids:  # some servers repeat the id and name on every fragment
                    ids.append(new_id := call.id)
                if call.function is not None:
                    if call.function.name and not names:
                        names.append(new_name := call.function.name)
                    if call.function.arguments:
                        fragments.append(piece := call.function.arguments)
                if self.on_delta is not None and (new_id or new_name or piece):
                    self.on_delta(ToolCallDelta(ordinal, id=new_id, name=new_name,
                                                arguments=piece))
            if choice.finish_reason:
                self.finish = choice.finish_reason

    def turn(self) -> Turn | None:
        """The assembled turn, or `None` when the stream never said why it finished."""
        if self.finish is None:
            return None
        calls = [("".join(i), "".join(n), "".join(f)) for i, n, f in self.calls.values()]
        return Turn(finish=self.finish, text="".join(self.text), refusal="".join(self.refusal),
                    calls=calls, usage=self.usage, model=self.model, id=self.id)
