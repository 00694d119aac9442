"""Mock transports that play the model's part over each provider's real wire format.

The SDKs are the real ones; only the HTTP transport is replaced. A `Wire` records every request
body exactly as the SDK sent it and answers with `play(body)`, which reads what the "model" was
shown (e.g. the `$ref` in the previous tool result) and replies in the provider's JSON or SSE.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import httpx2

from byref.testing import result_text
from byref.tools import tool
from byref.tools.readers.read_result import make_read_result

A_MODEL = "claude-sonnet-4-6"
O_MODEL = "gpt-5"
_ids = itertools.count(1)

REF_SCHEMA = {
    "type": "object",
    "properties": {"$ref": {"type": ["string", "object"],
                            "properties": {"type": {"enum": ["Message", "Blob"]}}}},
    "required": ["$ref"],
    "additionalProperties": False,
}
REF_POINTER = {"$ref": "#/$defs/ref"}
"""How a property names the ref schema when several share it (under the schema's `$defs`)."""
COUNT_SCHEMA = {
    "type": "object",
    "properties": {
        "rows": {"anyOf": [{"type": "array", "items": {"type": "object"}}, REF_POINTER]},
        "label": {"anyOf": [{"type": "string", "default": "rows"}, REF_POINTER]},
    },
    "required": ["rows"], "additionalProperties": False, "$defs": {"ref": REF_SCHEMA},
}
"""`count`'s declared schema: two data parameters, one shared ref definition."""


READ_RESULT_LITERALS = {("read_result", name) for name in make_read_result().literal}
"""read_result's own bounds and field names: the model writes them, never a ref."""


def takes_ref(schema: dict[str, Any], name: str) -> bool:
    """Whether property `name` of a declared schema accepts the ref (inline or by pointer)."""
    prop = schema["properties"][name]
    ref = [REF_SCHEMA, *([REF_POINTER] if schema.get("$defs", {}).get("ref") == REF_SCHEMA
                         else [])]
    return prop in ref or any(a in ref for a in prop.get("anyOf", []))


class Wire:
    """A recording transport; `limit` bounds the conversation so a runaway loop fails fast."""

    def __init__(self, play: Callable[[dict[str, Any]], httpx2.Response], limit: int = 40) -> None:
        self.play = play
        self.limit = limit
        self.raw: list[bytes] = []
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        assert len(self.raw) < self.limit, f"more than {self.limit} requests: a runaway loop"
        self.raw.append(request.content)
        self.paths.append(request.url.path)
        body = json.loads(request.content)
        self.bodies.append(body)
        return self.play(body)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self), timeout=httpx2.Timeout(5.0))

    def async_client(self) -> httpx2.AsyncClient:
        """The same transport for an SDK's async client (`AsyncAnthropic`, `AsyncOpenAI`)."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self),
                                  timeout=httpx2.Timeout(5.0))

    def sent(self) -> str:
        return b"\n".join(self.raw).decode()


def sse(events: list[tuple[str | None, Any]], tail: str = "") -> httpx2.Response:
    """Server-sent events: each `(name, data)` as an `event:` (when named) and a `data:` line;
    `tail` is sent last as written (Chat Completions ends with `data: [DONE]`)."""
    text = "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
                   for name, data in events) + tail
    return httpx2.Response(200, content=text.encode(),
                           headers={"content-type": "text/event-stream"})


# -- Anthropic Messages API --------------------------------------------------------------------
def a_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def a_tool_use(name: str, arguments: Any, id: str | None = None) -> dict[str, Any]:
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name,
            "input": arguments}


def a_message(*content: dict[str, Any], stop_reason: str | None = None,
              usage: dict[str, Any] | None = None) -> dict[str, Any]:
    stop = stop_reason or ("tool_use" if any(c["type"] == "tool_use" for c in content)
                           else "end_turn")
    return {"id": f"msg_{next(_ids):04d}", "type": "message", "role": "assistant",
            "model": A_MODEL, "content": list(content), "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage or {"input_tokens": 50, "output_tokens": 20,
                               "cache_creation_input_tokens": 0,
                               "cache_read_input_tokens": 900}}


def a_json(message: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=message, headers={"request-id": "req_ok"})


def a_sse(message: dict[str, Any]) -> httpx2.Response:
    """The same message as the Messages API streams it: start, blocks as deltas, delta, stop."""
    start = {**message, "content": [], "stop_reason": None,
             "usage": {**message["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start",
                                                 {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            text = block["text"]
            deltas = [{"type": "text_delta", "text": text[j:j + 7]}
                      for j in range(0, len(text), 7)]
        else:
            opening = {**block, "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": raw[j:j + 11]}
                      for j in range(0, len(raw), 11)]
        events.append(("content_block_start",
                       {"type": "content_block_start", "index": i, "content_block": opening}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return sse(events)


def a_error(status: int, kind: str, message: str) -> httpx2.Response:
    return httpx2.Response(status, json={"type": "error",
                                         "error": {"type": kind, "message": message}},
                           headers={"request-id": "req_err"})


def a_turn(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def a_last_result(body: dict[str, Any]) -> Any:
    """The newest tool result the model was shown, parsed (what a model reads a ref out of)."""
    for message in reversed(body["messages"]):
        for block in reversed(message["content"]):
            if block["type"] == "tool_result":
                return json.loads(result_text(block["content"]))
    raise AssertionError("no tool result in the request")


# -- OpenAI Responses API ----------------------------------------------------------------------
def o_text(text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{next(_ids):04d}", "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def o_call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{next(_ids):04d}",
            "call_id": call_id or f"call_{next(_ids):04d}", "name": name,
            "arguments": json.dumps(arguments), "status": "completed"}


def o_search_call(arguments: dict[str, Any], call_id: str = "call_search") -> dict[str, Any]:
    return {"type": "tool_search_call", "id": f"tsc_{next(_ids):04d}", "call_id": call_id,
            "execution": "client", "status": "completed", "arguments": arguments}


def o_response(*output: dict[str, Any], status: str = "completed",
               incomplete: str | None = None) -> dict[str, Any]:
    return {"id": f"resp_{next(_ids):04d}", "object": "response", "created_at": 1767225600,
            "model": "gpt-5-2025-08-07", "status": status, "output": list(output),
            "error": None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 1000, "output_tokens": 20, "total_tokens": 1020,
                      "input_tokens_details": {"cached_tokens": 896, "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def o_json(response: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=response, headers={"x-request-id": "req_ok"})


def o_sse(response: dict[str, Any]) -> httpx2.Response:
    """The same response as the Responses API streams it."""
    seq = itertools.count()
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "sequence_number": next(seq),
                              "response": opening})]
    for i, item in enumerate(response["output"]):
        events.append(("response.output_item.added", {
            "type": "response.output_item.added", "sequence_number": next(seq),
            "output_index": i, "item": {**item, "status": "in_progress"}}))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events += [("response.output_text.delta", {
                "type": "response.output_text.delta", "sequence_number": next(seq),
                "item_id": item["id"], "output_index": i, "content_index": 0,
                "delta": text[j:j + 7], "logprobs": []}) for j in range(0, len(text), 7)]
        elif item["type"] == "function_call":
            events.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta",
                "sequence_number": next(seq), "item_id": item["id"], "output_index": i,
                "delta": item["arguments"]}))
        events.append(("response.output_item.done", {
            "type": "response.output_item.done", "sequence_number": next(seq),
            "output_index": i, "item": item}))
    final = "response.completed" if response["status"] == "completed" else (
        f"response.{response['status']}")
    events.append((final, {"type": final, "sequence_number": next(seq), "response": response}))
    return sse(events)


def o_error(status: int, kind: str, message: str) -> httpx2.Response:
    return httpx2.Response(status, json={"error": {"message": message, "type": kind,
                                                   "param": None, "code": None}},
                           headers={"x-request-id": "req_err"})


def o_outputs(body: dict[str, Any]) -> int:
    return sum(1 for i in body["input"]
               if i.get("type") in ("function_call_output", "tool_search_output"))


def o_last_result(body: dict[str, Any]) -> Any:
    for item in reversed(body["input"]):
        if item.get("type") == "function_call_output":
            return json.loads(result_text(item["output"]))
    raise AssertionError("no function_call_output in the request")


# -- the tools of the small session both wire tests play -----------------------------------------
ROWS_REF = {"$ref": {"type": "Message", "seq": 2, "part": 0, "field": "items"}}
"""What the "model" writes to pass the items of the first result (message 2, part 0) along."""


@tool
def fetch(project: str) -> dict[str, Any]:
    """Fetch a project's items."""
    return {"project": project, "items": [{"id": 1}, {"id": 2}, {"id": 3}]}


@tool
def count(rows: list[dict[str, Any]], label: str = "rows") -> str:
    """Count rows."""
    return f"{len(rows)} {label}"
