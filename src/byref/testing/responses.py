"""The OpenAI Responses API wire of `ChatStandIn`: a `POST /v1/responses` body as a `Request`, and
a script step's `Response` as a `response` object or its event stream.

Owns the Responses shapes only (the server and the script are `byref.testing.chat`'s). The law:
a turn reads the same on either wire — `instructions` and system/developer messages are `system`,
`function_call` items are `tool_use`, `function_call_output` items are `tool_result` (consecutive
ones share a user message), the `tools` as the client sent them (with those an `additional_tools`
item adds) — and a step answers with a
`message` item (its text) and a `function_call` item per call, in the step's order.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from byref.errors import DeveloperError
from byref.harness.messages import Block, ChatMessage, Request, Response

_SKIPPED = frozenset({"reasoning"})  # the stand-in sends none, so a client has none to return


class WireError(DeveloperError, ValueError):
    """A request the stand-in cannot read; the client hears it as a 400 with this message."""


def request_from_responses(body: dict[str, Any]) -> Request:
    """A Responses request body as the `Request` a script step reads."""
    if body.get("previous_response_id"):
        raise WireError("The stand-in keeps no responses: send the whole conversation as "
                        "`input`, not 'previous_response_id'.")
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    tools = list(body.get("tools") or ())
    messages: list[ChatMessage] = []
    items = body.get("input", [])
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items:
        kind, text = item.get("type", "message"), text_of(item.get("content"))
        if kind == "message" and item.get("role") in ("system", "developer"):
            system.append(text)
        elif kind == "message" and item.get("role") == "assistant":
            if text:
                _add(messages, "assistant", Block("text", text=text))
        elif kind == "message":
            messages.append(ChatMessage("user", (Block("text", text=text),)))
        elif kind == "function_call":
            _add(messages, "assistant", Block(
                "tool_use", id=item.get("call_id", ""), name=item.get("name", ""),
                input=_arguments(item)))
        elif kind == "function_call_output":
            _add(messages, "user", Block("tool_result", id=item.get("call_id", ""),
                                         text=text_of(item.get("output"))))
        elif kind == "additional_tools":  # tools made available from this item on
            tools += item.get("tools") or ()
        elif kind not in _SKIPPED:
            raise WireError(f"The stand-in reads message, function_call, function_call_output "
                            f"and additional_tools input items, not {kind!r}.")
    return Request(system="\n\n".join(system), tools=tuple(tools), messages=tuple(messages))


def _arguments(item: dict[str, Any]) -> Any:
    try:
        return json.loads(item.get("arguments") or "{}")
    except ValueError as exc:
        raise WireError(f"The function_call {item.get('call_id')!r} has arguments that are not "
                        f"JSON: {exc}.") from None


def _add(messages: list[ChatMessage], role: Literal["user", "assistant"], block: Block) -> None:
    """One turn's items make one message: an assistant's text and calls, a user's results."""
    last = messages[-1] if messages else None
    if last is not None and last.role == role and (
            role == "assistant" or all(b.type == "tool_result" for b in last.content)):
        messages[-1] = ChatMessage(role, (*last.content, block))
    else:
        messages.append(ChatMessage(role, (block,)))


def response_object(response: Response, body: dict[str, Any], *, model: str = "stand-in",
                    turn: int = 1) -> dict[str, Any]:
    """A script step's `Response` as a completed `response` object answering `body`."""
    output: list[dict[str, Any]] = []
    text = "".join(b.text for b in response.blocks if b.type == "text")
    for i, b in enumerate(response.blocks):
        if b.type == "text" and b.text and not any(o["type"] == "message" for o in output):
            output.append({"type": "message", "id": f"msg_stand_in_{turn}", "role": "assistant",
                           "status": "completed", "content": [
                               {"type": "output_text", "text": text, "annotations": []}]})
        elif b.type == "tool_use":
            output.append({"type": "function_call", "id": f"fc_stand_in_{turn}_{i}",
                           "call_id": b.id or f"call_{turn}_{i}", "name": b.name,
                           "arguments": json.dumps(b.input or {}), "status": "completed"})
    return {"id": f"resp_stand_in_{turn}", "object": "response", "created_at": 0,
            "status": "completed", "model": model, "output": output,
            "instructions": body.get("instructions"), "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice", "auto"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "error": None, "incomplete_details": None, "metadata": {},
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def events(done: dict[str, Any]) -> list[dict[str, Any]]:
    """A response as the events of its stream: created, each output item added, its text or
    arguments in one delta, done, and the completed response."""
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    out: list[dict[str, Any]] = [{"type": "response.created", "response": started},
                                 {"type": "response.in_progress", "response": started}]
    for index, item in enumerate(done["output"]):
        at = {"output_index": index}
        if item["type"] == "message":
            [part] = item["content"]
            at_part = {**at, "item_id": item["id"], "content_index": 0}
            out += [{"type": "response.output_item.added", **at,
                     "item": {**item, "status": "in_progress", "content": []}},
                    {"type": "response.content_part.added", **at_part,
                     "part": {**part, "text": ""}},
                    {"type": "response.output_text.delta", **at_part, "delta": part["text"],
                     "logprobs": []},
                    {"type": "response.output_text.done", **at_part, "text": part["text"],
                     "logprobs": []},
                    {"type": "response.content_part.done", **at_part, "part": part}]
        else:
            at_item = {**at, "item_id": item["id"]}
            out += [{"type": "response.output_item.added", **at,
                     "item": {**item, "status": "in_progress", "arguments": ""}},
                    {"type": "response.function_call_arguments.delta", **at_item,
                     "delta": item["arguments"]},
                    {"type": "response.function_call_arguments.done", **at_item,
                     "arguments": item["arguments"]}]
        out.append({"type": "response.output_item.done", **at, "item": item})
    out.append({"type": "response.completed", "response": done})
    return [{**event, "sequence_number": n} for n, event in enumerate(out)]


def text_of(content: Any) -> str:
    """A content field's text: a string, or the `text` of each part of a list."""
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""
