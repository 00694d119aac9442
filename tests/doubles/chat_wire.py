"""The Chat Completions wire format, played by the "model" (`doubles.wire.Wire` is the transport).

A completion is built as JSON (`c_completion`); `c_json` answers it whole, `c_sse` as the API
streams it: a role chunk, text in small deltas, each call opened with its id and name and its
arguments in fragments, the finish reason, then (as `include_usage` asks) a usage-only chunk.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2

from byref.testing import result_text
from doubles.wire import o_error, o_json, sse

C_MODEL = "gpt-4o"
C_SERVED = "gpt-4o-2024-08-06"
USAGE = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020,
         "prompt_tokens_details": {"cached_tokens": 896, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 0}}
_ids = itertools.count(1)


def c_call(name: str, arguments: Any, id: str | None = None) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": f"call_{next(_ids):04d}" if id is None else id, "type": "function",
            "function": {"name": name, "arguments": text}}


def c_completion(text: str | None = None, *calls: dict[str, Any], finish: str | None = None,
                 usage: dict[str, Any] | None = USAGE,
                 refusal: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if calls:
        message["tool_calls"] = list(calls)
    return {"id": f"chatcmpl-{next(_ids):04d}", "object": "chat.completion",
            "created": 1767225600, "model": C_SERVED,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish or ("tool_calls" if calls else "stop")}],
            "usage": usage}


c_json = o_json
"""A whole completion: OpenAI answers every API's JSON alike."""
c_error = o_error
"""An API error: Chat Completions and the Responses API share the error body."""


def c_chunks(completion: dict[str, Any], *, size: int = 5,
             interleave: bool = False) -> list[dict[str, Any]]:
    """The completion as stream chunks; `interleave` mixes the calls' argument fragments."""
    base = {"id": completion["id"], "object": "chat.completion.chunk",
            "created": completion["created"], "model": completion["model"], "usage": None}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = message["content"] or ""
    out += [chunk({"content": text[j:j + size]}) for j in range(0, len(text), size)]
    calls = message.get("tool_calls") or []
    pieces: list[list[dict[str, Any]]] = []
    for i, call in enumerate(calls):
        raw = call["function"]["arguments"]
        opening = {"index": i, "id": call["id"], "type": "function",
                   "function": {"name": call["function"]["name"], "arguments": ""}}
        pieces.append([opening] + [{"index": i, "function": {"arguments": raw[j:j + size]}}
                                   for j in range(0, len(raw), size)])
    if interleave:
        order = [p for group in itertools.zip_longest(*pieces) for p in group if p]
    else:
        order = [p for group in pieces for p in group]
    out += [chunk({"tool_calls": [p]}) for p in order]
    out.append(chunk({}, choice["finish_reason"]))
    if completion["usage"] is not None:
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return out


def c_stream(chunks: list[dict[str, Any]], done: bool = True) -> httpx2.Response:
    """Chunks as unnamed events, closed by `[DONE]` unless `done` is false (a cut stream)."""
    return sse([(None, c) for c in chunks], "data: [DONE]\n\n" if done else "")


def c_sse(completion: dict[str, Any], *, interleave: bool = False) -> httpx2.Response:
    return c_stream(c_chunks(completion, interleave=interleave))


def c_results(body: dict[str, Any]) -> int:
    """How many tool results the model has been shown: which turn of a script it is at."""
    return sum(1 for m in body["messages"] if m["role"] == "tool")


def c_turn(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def c_last_result(body: dict[str, Any]) -> Any:
    for message in reversed(body["messages"]):
        if message["role"] == "tool":
            return json.loads(result_text(message["content"]))
    raise AssertionError("no tool message in the request")
