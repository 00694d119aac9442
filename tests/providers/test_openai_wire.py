"""The OpenAI adapter over the real `openai` SDK (Responses API), on its wire format."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from byref.dispatch.outbound.reflines import ref_line
from byref.harness import Harness
from byref.harness.messages import Usage
from byref.harness.providers import ProviderError, model_from_id
from byref.harness.providers.openai import OpenAIModel
from byref.jsonview import dumps
from byref.testing import result_text
from doubles.wire import (
    COUNT_SCHEMA,
    READ_RESULT_LITERALS,
    ROWS_REF,
    Wire,
    count,
    fetch,
    o_call,
    o_error,
    o_json,
    o_outputs,
    o_response,
    o_sse,
    o_text,
    sse,
    takes_ref,
)


def counting_play(message: Any = o_json) -> Any:
    def play(body: dict[str, Any]) -> Any:
        turn = o_outputs(body)
        if turn == 0:
            return message(o_response(o_text("Fetching."),
                                      o_call("fetch", {"project": "ATLAS"}, call_id="call_01")))
        if turn == 1:
            return message(o_response(o_call("count", {"rows": ROWS_REF}, call_id="call_02")))
        return message(o_response(o_text("3 rows.")))

    return play


def model(wire: Wire, **options: Any) -> OpenAIModel:
    built = model_from_id("openai:gpt-5", api_key="test", http_client=wire.client(),
                          max_retries=0, **options)
    assert isinstance(built, OpenAIModel)
    return built


def test_function_call_turns_send_exact_bodies_with_refs_intact() -> None:
    wire = Wire(counting_play())
    m = model(wire)
    run = Harness(m, [fetch, count], system="Be brief.").run_sync("How many ATLAS items?")
    assert run.text == "3 rows."
    assert wire.paths == ["/v1/responses"] * 3
    rendered = [p.rendered for msg in run.transcript for p in msg.parts if msg.role == "tool"]
    last = wire.bodies[-1]
    tools = last.pop("tools")
    prefix = dumps(["Be brief.", tools]).encode()
    assert last == {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "store": False,
        "prompt_cache_key": "byref-" + hashlib.sha256(prefix).hexdigest()[:32],
        "input": [
            {"role": "user", "content": "How many ATLAS items?"},
            {"role": "assistant", "content": "Fetching."},
            {"type": "function_call", "call_id": "call_01", "name": "fetch",
             "arguments": '{"project":"ATLAS"}'},
            {"type": "function_call_output", "call_id": "call_01", "output": rendered[0]},
            # The $ref the model wrote is sent back verbatim inside the arguments text.
            {"type": "function_call", "call_id": "call_02", "name": "count",
             "arguments": json.dumps(ROWS_REF_ARGS, separators=(",", ":"))},
            {"type": "function_call_output", "call_id": "call_02",
             "output": f"3 rows\n{ref_line(4, 0)}"},
        ],
    }
    by_name = {t["name"]: t for t in tools}
    assert by_name["count"] == {
        "type": "function", "name": "count", "description": "Count rows.", "strict": False,
        "parameters": COUNT_SCHEMA}
    for declared in tools:
        schema = declared["parameters"]
        assert not {"anyOf", "oneOf", "allOf"} & set(schema)
        # a data parameter takes a ref (read_json's source is the ref schema itself); only
        # read_result's own bounds (a count, field names) are written by the model
        assert all(takes_ref(schema, name) for name in schema["properties"]
                   if (declared["name"], name) not in READ_RESULT_LITERALS)
        assert "defer_loading" not in declared
    assert [c.input for c in run.calls] == [{"project": "ATLAS"}, ROWS_REF_ARGS]
    assert result_text(rendered[1]) == "3 rows"
    # Every turn names the same cache key: the prefix it hashes did not change.
    assert len({b["prompt_cache_key"] for b in wire.bodies}) == 1


ROWS_REF_ARGS = {"rows": ROWS_REF}


def test_the_stream_is_the_same_turn_as_the_plain_call() -> None:
    plain, streamed = Wire(counting_play()), Wire(counting_play(o_sse))
    runs = [Harness(model(w, stream=s), [fetch, count], system="Be brief.").run_sync("How many?")
            for w, s in ((plain, False), (streamed, True))]
    assert runs[0].text == runs[1].text == "3 rows."
    for a, b in zip(plain.bodies, streamed.bodies, strict=True):
        assert b.pop("stream") is True
        assert a == b


def test_usage_with_cached_tokens_is_kept_per_turn() -> None:
    wire = Wire(counting_play(o_sse))
    m = model(wire, stream=True)
    Harness(m, [fetch, count]).run_sync("go")
    assert [u.stop_reason for u in m.turns] == ["tool_use", "tool_use", "end_turn"]
    assert m.turns[-1] == Usage(input_tokens=1000, output_tokens=20, cache_read_tokens=896,
                                cache_write_tokens=0, stop_reason="end_turn",
                                provider_stop_reason="completed", model="gpt-5-2025-08-07")


def test_incomplete_responses_map_to_stop_reasons() -> None:
    wire = Wire(lambda body: o_json(o_response(o_text("Partial"), status="incomplete",
                                               incomplete="max_output_tokens")))
    response = asyncio.run(model(wire).respond(Harness(model(wire), [count]).request()))
    assert response.usage is not None and response.usage.stop_reason == "max_tokens"
    cut = Wire(lambda body: o_json(o_response(o_call("count", {"rows": []}), status="incomplete",
                                              incomplete="max_output_tokens")))
    with pytest.raises(ProviderError, match=(
            r"^Model 'gpt-5' stopped \('max_output_tokens'\) in the middle of a tool call, so "
            r"its arguments may be cut short; raise max_output_tokens \(now 32\)\.$")):
        Harness(model(cut, max_output_tokens=32), [count]).run_sync("go")


def test_arguments_that_are_not_json_reach_dispatch_as_text_and_are_refused() -> None:
    bad = o_call("count", {}, call_id="c1")
    bad["arguments"] = "{rows: oops"
    replies = iter([o_response(bad), o_response(o_text("sorry"))])
    wire = Wire(lambda body: o_json(next(replies)))
    run = Harness(model(wire), [count]).run_sync("go")
    assert run.calls[0].input == "{rows: oops"
    sent = wire.bodies[-1]["input"]
    assert sent[1]["arguments"] == "{rows: oops"  # sent back exactly as the model wrote it
    assert "must be a JSON object" in sent[2]["output"]


@pytest.mark.parametrize(("status", "kind", "retryable", "tail"), [
    (400, "invalid_request_error", False, ""),
    (401, "invalid_request_error", False, " Check OPENAI_API_KEY."),
    (429, "rate_limit_error", True, " Rate limited; retry later or lower the request rate."),
])
def test_api_errors_become_provider_errors(status: int, kind: str, retryable: bool,
                                           tail: str) -> None:
    wire = Wire(lambda body: o_error(status, kind, "Invalid schema for function 'count'."))
    with pytest.raises(ProviderError) as caught:
        Harness(model(wire), [count]).run_sync("go")
    err = caught.value
    assert str(err) == (f"openai API answered {status} for model 'gpt-5': Invalid schema for "
                        f"function 'count'. ({kind}){tail}")
    assert (err.status, err.retryable, err.request_id) == (status, retryable, "req_err")
    assert len(wire.raw) == 1


def test_a_failed_stream_is_a_provider_error() -> None:
    failed = o_response(status="failed")
    failed["error"] = {"code": "server_error", "message": "The model crashed."}
    with pytest.raises(ProviderError, match=r"^openai model 'gpt-5' failed: The model crashed\.$"):
        Harness(model(Wire(lambda body: o_sse(failed)), stream=True), [count]).run_sync("go")
    truncated = Wire(lambda body: sse([("response.created", {
        "type": "response.created", "sequence_number": 0,
        "response": {**o_response(), "status": "in_progress"}})]))
    with pytest.raises(ProviderError, match="ended without a final response"):
        Harness(model(truncated, stream=True), [count]).run_sync("go")
