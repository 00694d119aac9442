"""The Chat Completions adapter over the real `openai` SDK, on its wire format (mock transport)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import sys
from typing import Any

import httpx2
import pytest

from byref.dispatch.outbound.reflines import ref_line
from byref.errors import install_hint
from byref.harness import Harness
from byref.harness.messages import Usage
from byref.harness.providers import (
    MissingKeyError,
    MissingSDKError,
    ProviderError,
    model_from_id,
)
from byref.harness.providers.openai import OpenAIModel
from byref.harness.providers.openai_chat import NO_KEY, OpenAIChatModel
from byref.jsonview import dumps
from byref.testing import result_text
from doubles.chat_wire import (
    C_MODEL,
    C_SERVED,
    c_call,
    c_chunks,
    c_completion,
    c_error,
    c_json,
    c_results,
    c_sse,
    c_stream,
    c_turn,
)
from doubles.wire import COUNT_SCHEMA, ROWS_REF, Wire, count, fetch

LOCAL = "http://127.0.0.1:11434/v1"


class Recorder(Wire):
    """A `Wire` that also keeps each request's URL and Authorization header."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.urls: list[str] = []
        self.auth: list[str | None] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.urls.append(str(request.url))
        self.auth.append(request.headers.get("authorization"))
        return super().__call__(request)


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def model(wire: Wire, model_id: str = f"openai-chat:{C_MODEL}", **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", "test")
    built = model_from_id(model_id, http_client=wire.client(), max_retries=0, **options)
    assert isinstance(built, OpenAIChatModel)
    return built


def counting_play(stream: bool = False) -> Any:
    reply = c_sse if stream else c_json

    def play(body: dict[str, Any]) -> Any:
        turn = c_results(body)
        if turn == 0:
            return reply(c_completion("Fetching.", c_call("fetch", {"project": "ATLAS"},
                                                          id="call_01")))
        if turn == 1:
            return reply(c_completion(None, c_call("count", {"rows": ROWS_REF}, id="call_02")))
        return reply(c_completion("3 rows."))

    return play


def test_a_tool_call_round_trip_sends_exact_bodies_with_refs_intact() -> None:
    wire = Recorder(counting_play())
    run = Harness(model(wire), [fetch, count], system="Be brief.").run_sync("How many ATLAS items?")
    assert run.text == "3 rows."
    assert wire.urls == ["https://api.openai.com/v1/chat/completions"] * 3
    assert wire.auth == ["Bearer test"] * 3
    rendered = [p.rendered for msg in run.transcript for p in msg.parts if msg.role == "tool"]
    last = wire.bodies[-1]
    tools = last.pop("tools")
    prefix = dumps(["Be brief.", tools]).encode()
    assert last == {
        "model": "gpt-4o",
        "prompt_cache_key": "byref-" + hashlib.sha256(prefix).hexdigest()[:32],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "How many ATLAS items?"},
            {"role": "assistant", "content": "Fetching.", "tool_calls": [
                {"id": "call_01", "type": "function",
                 "function": {"name": "fetch", "arguments": '{"project":"ATLAS"}'}}]},
            {"role": "tool", "tool_call_id": "call_01", "content": rendered[0]},
            # The $ref the model wrote goes back verbatim inside the arguments text.
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_02", "type": "function",
                 "function": {"name": "count", "arguments": dumps({"rows": ROWS_REF})}}]},
            {"role": "tool", "tool_call_id": "call_02",
             "content": f"3 rows\n{ref_line(4, 0)}"},
        ],
    }
    assert [c.input for c in run.calls] == [{"project": "ATLAS"}, {"rows": ROWS_REF}]
    assert result_text(rendered[1]) == "3 rows"


def test_declarations_are_the_shared_ones_as_function_tools_name_sorted_and_stable() -> None:
    wire = Wire(counting_play())
    harness = Harness(model(wire), [fetch, count], system="Be brief.")
    harness.run_sync("How many?")
    tools = [b["tools"] for b in wire.bodies]
    names = [t["function"]["name"] for t in tools[0]]
    assert names == sorted(names) and names[:2] == ["count", "fetch"]
    assert tools[0][0] == {"type": "function", "function": {
        "name": "count", "description": "Count rows.",
        "parameters": COUNT_SCHEMA}}
    # Byte-stable: the serialized declarations and the cache key are the same every turn.
    raw = [json.dumps(t, separators=(",", ":"), ensure_ascii=False).encode() for t in tools]
    assert len(set(raw)) == 1 and all(r in sent for r, sent in zip(raw, wire.raw, strict=True))
    assert len({b["prompt_cache_key"] for b in wire.bodies}) == 1
    # The same declarations the Responses adapter gets, in the same order.
    request = harness.requests[-1]
    responses = OpenAIModel("gpt-5", api_key="test").params(request)["tools"]
    assert [t["function"] for t in tools[-1]] == [
        {k: r[k] for k in ("name", "description", "parameters")} for r in responses]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_parallel_calls_in_one_turn_are_dispatched_and_answered_in_order(stream: bool) -> None:
    def play(body: dict[str, Any]) -> Any:
        if c_turn(body) == 0:
            completion = c_completion(None, c_call("fetch", {"project": "ATLAS"}, id="c_a"),
                                      c_call("fetch", {"project": "ZEUS"}, id="c_b"),
                                      c_call("count", {"rows": [{}, {}]}, id="c_c"))
            return c_sse(completion, interleave=True) if stream else c_json(completion)
        return c_json(c_completion("done")) if not stream else c_sse(c_completion("done"))

    wire = Wire(play)
    run = Harness(model(wire, stream=stream), [fetch, count]).run_sync("Both projects?")
    assert [(c.id, c.name, c.input) for c in run.calls] == [
        ("c_a", "fetch", {"project": "ATLAS"}), ("c_b", "fetch", {"project": "ZEUS"}),
        ("c_c", "count", {"rows": [{}, {}]})]
    messages = wire.bodies[-1]["messages"][1:]  # after the system message
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["c_a", "c_b", "c_c"]
    assert [m["tool_call_id"] for m in messages[2:]] == ["c_a", "c_b", "c_c"]
    assert json.loads(result_text(messages[3]["content"]))["project"] == "ZEUS"
    assert messages[4]["content"] == f"2 rows\n{ref_line(2, 2)}"


def test_the_stream_is_the_same_turn_as_the_plain_call_with_usage_from_the_last_chunk() -> None:
    plain, streamed = Wire(counting_play()), Wire(counting_play(stream=True))
    models = [model(plain), model(streamed, stream=True)]
    runs = [Harness(m, [fetch, count], system="Be brief.").run_sync("How many?") for m in models]
    assert runs[0].text == runs[1].text == "3 rows."
    assert [c.input for c in runs[0].calls] == [c.input for c in runs[1].calls]
    for a, b in zip(plain.bodies, streamed.bodies, strict=True):
        assert b.pop("stream") is True
        assert b.pop("stream_options") == {"include_usage": True}
        assert a == b
    assert models[0].turns == models[1].turns
    assert [u.stop_reason for u in models[1].turns] == ["tool_use", "tool_use", "end_turn"]
    assert models[1].turns[0] == Usage(
        input_tokens=1000, output_tokens=20, cache_read_tokens=896, cache_write_tokens=None,
        stop_reason="tool_use", provider_stop_reason="tool_calls", model=C_SERVED)


def test_stream_fragments_join_per_index_even_when_a_server_repeats_ids_and_names() -> None:
    chunks = c_chunks(c_completion("Hi", c_call("count", {"rows": [{"id": 1}]}, id="c1"),
                                   c_call("fetch", {"project": "A"}, id="c2")), interleave=True)
    for c in chunks:  # e.g. some servers send the id and name with every fragment
        for d in c["choices"][0]["delta"].get("tool_calls", []) if c["choices"] else []:
            d["id"] = ["c1", "c2"][d["index"]]
            d.setdefault("function", {})["name"] = ["count", "fetch"][d["index"]]
    wire = Wire(lambda body: c_stream(chunks))
    m = model(wire, stream=True)
    response = asyncio.run(m.respond(Harness(m, [count, fetch]).request()))
    assert [(b.type, b.id, b.name, b.input if b.type == "tool_use" else b.text)
            for b in response.blocks] == [("text", "", "", "Hi"),
                                          ("tool_use", "c1", "count", {"rows": [{"id": 1}]}),
                                          ("tool_use", "c2", "fetch", {"project": "A"})]


def test_a_stream_cut_before_its_finish_or_failing_midway_is_a_provider_error() -> None:
    cut = c_chunks(c_completion(None, c_call("count", {"rows": []})))[:-2]  # no finish, no usage
    with pytest.raises(ProviderError) as caught:
        Harness(model(Wire(lambda body: c_stream(cut, done=False)), stream=True),
                [count]).run_sync("go")
    assert str(caught.value) == (
        "The openai-chat stream ended without a finish reason for model 'gpt-4o'.")
    assert caught.value.retryable
    failing = Wire(lambda body: c_stream([*cut[:2], {"error": {"message": "The model crashed."}}]))
    with pytest.raises(ProviderError, match=(
            r"^openai-chat API call for model 'gpt-4o' failed: The model crashed\.$")):
        Harness(model(failing, stream=True), [count]).run_sync("go")


def test_arguments_that_are_not_json_reach_dispatch_as_text_and_are_refused() -> None:
    replies = iter([c_completion(None, c_call("count", "{rows: oops", id="c1")),
                    c_completion("sorry")])
    wire = Wire(lambda body: c_json(next(replies)))
    run = Harness(model(wire), [count]).run_sync("go")
    assert run.calls[0].input == "{rows: oops"
    sent = wire.bodies[-1]["messages"][1:]  # after the system message
    # Sent back exactly as the model wrote it, and refused with words the model can act on.
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{rows: oops"
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": (
        "Input to tool 'count' must be a JSON object of its parameters; the arguments arrived "
        "as text that is not one ('{rows: oops'). Write them as a JSON object, e.g. "
        '{"name": value}.')}


@pytest.mark.parametrize(("message", "finish", "stop"), [
    ({"content": "Partial"}, "length", "max_tokens"),
    ({"content": ""}, "content_filter", "refusal"),
    ({"content": None, "refusal": "I can't help with that."}, "stop", "refusal"),
    # Some servers (Ollama among them) finish a tool-calling turn with "stop".
    ({"content": None, "tool_calls": [c_call("count", {"rows": []})]}, "stop", "tool_use"),
])
def test_finish_reasons_map_to_stop_reasons(message: dict[str, Any], finish: str,
                                            stop: str) -> None:
    completion = c_completion(finish=finish)
    completion["choices"][0]["message"].update(message)
    m = model(Wire(lambda body: c_json(completion)))
    response = asyncio.run(m.respond(Harness(m, [count]).request()))
    assert response.usage is not None
    assert (response.usage.stop_reason, response.usage.provider_stop_reason) == (stop, finish)


def test_a_turn_cut_short_in_a_call_or_with_no_choice_is_a_provider_error() -> None:
    cut = Wire(lambda body: c_json(c_completion(None, c_call("count", '{"rows": ['),
                                                finish="length")))
    with pytest.raises(ProviderError, match=(
            r"^Model 'gpt-4o' stopped \('length'\) in the middle of a tool call, so its "
            r"arguments may be cut short; raise max_output_tokens \(now 32\)\.$")):
        Harness(model(cut, max_output_tokens=32), [count]).run_sync("go")
    assert cut.bodies[0]["max_completion_tokens"] == 32
    empty = Wire(lambda body: c_json({**c_completion("x"), "choices": []}))
    with pytest.raises(ProviderError, match=(
            r"^The openai-chat answer held no choice for model 'gpt-4o'\.$")):
        Harness(model(empty), [count]).run_sync("go")


@pytest.mark.parametrize(("status", "kind", "retryable", "tail"), [
    (400, "invalid_request_error", False, ""),
    (401, "invalid_request_error", False, " Check OPENAI_API_KEY."),
    (429, "rate_limit_error", True, " Rate limited; retry later or lower the request rate."),
    (503, "server_error", True, " The provider failed; the same request may succeed later."),
])
def test_api_errors_become_provider_errors(status: int, kind: str, retryable: bool,
                                           tail: str) -> None:
    wire = Wire(lambda body: c_error(status, kind, "Invalid schema for function 'count'."))
    with pytest.raises(ProviderError) as caught:
        Harness(model(wire), [count]).run_sync("go")
    err = caught.value
    assert str(err) == (f"openai-chat API answered {status} for model 'gpt-4o': Invalid schema "
                        f"for function 'count'. ({kind}){tail}")
    assert (err.status, err.retryable, err.request_id) == (status, retryable, "req_err")
    assert len(wire.raw) == 1


@pytest.mark.usefixtures("no_env")
def test_a_base_url_needs_no_key_and_gets_only_the_common_fields() -> None:
    wire = Recorder(counting_play())
    m = model(wire, "openai-chat:llama3.1:8b", api_key=None, base_url=LOCAL,
              max_output_tokens=256)
    assert m.model == "llama3.1:8b"  # an Ollama tag keeps its colon
    assert Harness(m, [fetch, count]).run_sync("How many?").text == "3 rows."
    assert wire.urls == [f"{LOCAL}/chat/completions"] * 3
    assert wire.auth == [f"Bearer {NO_KEY}"] * 3
    assert all("prompt_cache_key" not in b and "max_completion_tokens" not in b
               for b in wire.bodies)
    assert [b["max_tokens"] for b in wire.bodies] == [256] * 3
    # A compatible server gets "" beside tool calls, never null (llama-cpp-python refuses null).
    called = [m["content"] for m in wire.bodies[-1]["messages"] if m.get("tool_calls")]
    assert called == ["Fetching.", ""]


@pytest.mark.usefixtures("no_env")
def test_the_default_endpoint_still_needs_a_key_and_openai_base_url_is_honoured(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(MissingKeyError) as caught:
        model_from_id("openai-chat:gpt-4o")
    assert str(caught.value) == (
        "No API key for model 'openai-chat:gpt-4o': set OPENAI_API_KEY in the environment (or "
        "pass api_key=... or a ready client).")
    assert caught.value.variable == "OPENAI_API_KEY"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    wire = Recorder(lambda body: c_json(c_completion("hi")))
    m = model(wire, api_key=None)
    assert Harness(m, [count]).run_sync("hello").text == "hi"
    assert wire.urls == ["http://127.0.0.1:8000/v1/chat/completions"]


def test_a_ready_client_is_used_as_given(no_env: None) -> None:
    import openai

    wire = Recorder(lambda body: c_json(c_completion("hi")))
    client = openai.OpenAI(api_key="sk-x", base_url=LOCAL, http_client=wire.client(),
                           max_retries=0)
    m = model_from_id("openai-chat:qwen3", client=client)
    assert Harness(m, [count]).run_sync("hello").text == "hi"
    assert wire.auth == ["Bearer sk-x"]
    assert "prompt_cache_key" not in wire.bodies[0]  # not OpenAI's endpoint


def test_calls_without_ids_get_distinct_ones_and_results_pair_with_them() -> None:
    first = c_completion(None, c_call("count", {"rows": []}, id=""),
                         c_call("count", {"rows": [{}]}, id=""))
    replies = iter([first, c_completion("ok")])
    wire = Wire(lambda body: c_json(next(replies)))
    run = Harness(model(wire), [count]).run_sync("go")
    ids = [c.id for c in run.calls]
    assert ids == [f"{first['id']}-0", f"{first['id']}-1"]
    assert [m.get("tool_call_id") for m in wire.bodies[-1]["messages"][3:]] == ids


def test_a_missing_sdk_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # importing it now fails as if absent
    with pytest.raises(MissingSDKError, match=(
            rf"^The 'openai' package needs byref's 'openai' extra: "
            rf"{re.escape(install_hint('openai'))}$")):
        model_from_id("openai-chat:qwen3", base_url=LOCAL)
