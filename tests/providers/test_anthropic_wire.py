"""The Anthropic adapter over the real `anthropic` SDK, on its real wire format (mock transport)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from byref.dispatch.outbound.reflines import ref_line
from byref.harness import Harness
from byref.harness.messages import Block, ChatMessage, Request, Response, Usage
from byref.harness.providers import ProviderError, model_from_id
from byref.harness.providers.anthropic import AnthropicModel
from byref.testing import result_text
from doubles.wire import (
    A_MODEL,
    COUNT_SCHEMA,
    READ_RESULT_LITERALS,
    REF_SCHEMA,
    ROWS_REF,
    Wire,
    a_error,
    a_json,
    a_message,
    a_sse,
    a_text,
    a_tool_use,
    a_turn,
    count,
    fetch,
    sse,
    takes_ref,
)

EPHEMERAL = {"type": "ephemeral"}


def counting_play(message: Any = a_json) -> Any:
    def play(body: dict[str, Any]) -> Any:
        turn = a_turn(body)
        if turn == 0:
            return message(a_message(a_text("Fetching."),
                                     a_tool_use("fetch", {"project": "ATLAS"}, id="toolu_01")))
        if turn == 1:
            return message(a_message(a_tool_use("count", {"rows": ROWS_REF}, id="toolu_02")))
        return message(a_message(a_text("3 rows.")))

    return play


def model(wire: Wire, **options: Any) -> AnthropicModel:
    built = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                          max_retries=0, **options)
    assert isinstance(built, AnthropicModel)
    return built


def test_tool_use_turns_send_exact_bodies_with_refs_intact() -> None:
    wire = Wire(counting_play())
    m = model(wire)
    run = Harness(m, [fetch, count], system="Be brief.").run_sync("How many ATLAS items?")
    assert run.text == "3 rows."
    assert wire.paths == ["/v1/messages"] * 3
    rendered = [p.rendered for msg in run.transcript for p in msg.parts if msg.role == "tool"]
    last = wire.bodies[-1]
    tools = last.pop("tools")
    assert last == {
        "max_tokens": 8192,
        "model": A_MODEL,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "How many ATLAS items?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Fetching."},
                {"type": "tool_use", "id": "toolu_01", "name": "fetch",
                 "input": {"project": "ATLAS"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": rendered[0]}]},
            # The model's $ref argument goes back to it exactly as it wrote it.
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_02", "name": "count",
                 "input": {"rows": ROWS_REF}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_02",
                 "content": f"3 rows\n{ref_line(4, 0)}",
                 "cache_control": EPHEMERAL}]},
        ],
    }
    assert json.loads(result_text(rendered[0]))["items"] == [{"id": 1}, {"id": 2}, {"id": 3}]
    by_name = {t["name"]: t for t in tools}
    assert by_name["count"] == {
        "name": "count", "description": "Count rows.",
        "input_schema": COUNT_SCHEMA}
    assert by_name["fetch"]["input_schema"]["properties"] == {
        "project": {"anyOf": [{"type": "string"}, REF_SCHEMA]}}
    assert [t["name"] for t in tools] == sorted(by_name)
    for declared in tools:  # every declaration: anyOf per property, never at the root
        schema = declared["input_schema"]
        assert not {"anyOf", "oneOf", "allOf"} & set(schema)
        # a data parameter takes a ref (read_json's source is the ref schema itself); only
        # read_result's own bounds (a count, field names) are written by the model
        assert all(takes_ref(schema, name) for name in schema["properties"]
                   if (declared["name"], name) not in READ_RESULT_LITERALS)
        assert "defer_loading" not in declared and "cache_control" not in declared
    # The $ref reached the tool resolved: count saw the three rows, not the envelope.
    assert result_text(rendered[1]) == "3 rows"


def test_the_stream_is_the_same_turn_as_the_plain_call() -> None:
    plain, streamed = Wire(counting_play()), Wire(counting_play(a_sse))
    runs = [Harness(model(w, stream=s), [fetch, count], system="Be brief.").run_sync("How many?")
            for w, s in ((plain, False), (streamed, True))]
    assert runs[0].text == runs[1].text == "3 rows."
    for a, b in zip(plain.bodies, streamed.bodies, strict=True):
        assert b.pop("stream") is True
        assert a == b
    calls = [c.input for c in runs[1].calls]
    assert calls == [{"project": "ATLAS"}, {"rows": ROWS_REF}]


def test_usage_and_stop_reasons_are_kept_per_turn() -> None:
    wire = Wire(counting_play(a_sse))
    m = model(wire, stream=True)
    Harness(m, [fetch, count]).run_sync("go")
    assert [u.stop_reason for u in m.turns] == ["tool_use", "tool_use", "end_turn"]
    assert m.turns[0] == Usage(input_tokens=950, output_tokens=20, cache_read_tokens=900,
                               cache_write_tokens=0, stop_reason="tool_use",
                               provider_stop_reason="tool_use", model=A_MODEL)


def test_a_tool_call_cut_short_by_max_tokens_is_an_error_not_a_call() -> None:
    wire = Wire(lambda body: a_json(a_message(
        a_tool_use("count", {"rows": []}), stop_reason="max_tokens")))
    with pytest.raises(ProviderError, match=(
            r"^Model 'claude-sonnet-4-6' stopped \('max_tokens'\) in the middle of a tool call, "
            r"so its arguments may be cut short; raise max_tokens \(now 64\)\.$")):
        Harness(model(wire, max_tokens=64), [count]).run_sync("go")


@pytest.mark.parametrize(("status", "kind", "retryable", "tail"), [
    (400, "invalid_request_error", False, ""),
    (401, "authentication_error", False, " Check ANTHROPIC_API_KEY."),
    (529, "overloaded_error", True, " The provider failed; the same request may succeed later."),
])
def test_api_errors_become_provider_errors(status: int, kind: str, retryable: bool,
                                           tail: str) -> None:
    wire = Wire(lambda body: a_error(status, kind, "tools.0.custom: something is wrong"))
    with pytest.raises(ProviderError) as caught:
        Harness(model(wire), [count]).run_sync("go")
    err = caught.value
    assert str(err) == (f"anthropic API answered {status} for model 'claude-sonnet-4-6': "
                        f"tools.0.custom: something is wrong ({kind}){tail}")
    assert (err.status, err.retryable, err.request_id) == (status, retryable, "req_err")
    assert len(wire.raw) == 1  # max_retries=0: no retry, no sleep


def test_an_error_event_inside_a_stream_is_a_provider_error() -> None:
    def play(body: dict[str, Any]) -> Any:
        start = {**a_message(a_text("x")), "content": [], "stop_reason": None}
        return sse([("message_start", {"type": "message_start", "message": start}),
                    ("error", {"type": "error", "error": {"type": "overloaded_error",
                                                          "message": "Overloaded"}})])

    with pytest.raises(ProviderError, match=r"Overloaded"):
        Harness(model(Wire(play), stream=True), [count]).run_sync("go")


def _request(system: str, tools: tuple[dict[str, Any], ...] = ()) -> Request:
    messages = (ChatMessage("user", (Block("text", text="hi"),)),
                ChatMessage("assistant", (Block("text", text=""),)),
                ChatMessage("user", (Block("text", text="again"),)))
    return Request(system, tools, messages)


def test_breakpoints_sit_after_the_stable_prefix_and_nowhere_inside_it() -> None:
    wire = Wire(lambda body: a_json(a_message(a_text("ok"))))
    decl = count.declaration()
    varying = "You currently have 2 of 40 activated tools loaded."
    m = model(wire)
    asyncio.run(m.respond(_request(f"Stable rules.\n\n{varying}", (decl,))))
    body = wire.bodies[-1]
    # The working-set line is the one varying text: it follows the breakpoint, never precedes it.
    assert body["system"] == [
        {"type": "text", "text": "Stable rules.", "cache_control": EPHEMERAL},
        {"type": "text", "text": varying}]
    assert "cache_control" not in body["tools"][0]
    # An empty assistant turn cannot be sent empty; it gets a fixed placeholder.
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "(no text)"}]},
        {"role": "user", "content": [{"type": "text", "text": "again",
                                      "cache_control": EPHEMERAL}]}]
    # No system text: the breakpoint ends the tools.
    asyncio.run(model(wire).respond(_request("", (decl,))))
    assert wire.bodies[-1]["tools"][-1]["cache_control"] == EPHEMERAL
    asyncio.run(model(wire, cache=False).respond(_request("Stable rules.", (decl,))))
    assert "cache_control" not in wire.sent().split("\n")[-1]
    asyncio.run(model(wire, cache_ttl="1h", cache_conversation=False).respond(
        _request("S.", (decl,))))
    body = wire.bodies[-1]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in json.dumps(body["messages"])


def test_consecutive_user_turns_are_merged_for_the_api() -> None:
    wire = Wire(lambda body: a_json(a_message(a_text("ok"))))
    request = Request("S.", (), (ChatMessage("user", (Block("text", text="a"),)),
                                 ChatMessage("user", (Block("text", text="b"),))))
    response = asyncio.run(model(wire, cache=False).respond(request))
    assert response == Response((Block("text", text="ok"),), response.usage)
    assert wire.bodies[-1]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
