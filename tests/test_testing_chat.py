"""`byref.testing.ChatStandIn`: a Chat Completions server on loopback playing a byref script,
driven by the real `openai` client (plain and streamed), and its request parser under
Hypothesis."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.testing import ChatStandIn, call, last_result, say
from byref.testing.chat import request_from_chat

openai = pytest.importorskip("openai", reason="needs the openai extra")

WEATHER = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def _client(stand_in: ChatStandIn) -> Any:
    return openai.OpenAI(base_url=stand_in.base_url, api_key="k", max_retries=0)


@pytest.mark.parametrize("stream", [False, True])
def test_the_real_openai_client_gets_the_scripts_call_then_its_answer(stream: bool) -> None:
    script = [call("weather", {"city": "Paris"}),
              lambda r: say(f"It is {last_result(r)['temp_c']} °C.")]
    with ChatStandIn(script) as stand_in:
        client = _client(stand_in)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
        first = _complete(client, messages, stream)
        [tool_call] = first["tool_calls"]
        assert tool_call["function"] == {"name": "weather", "arguments": '{"city": "Paris"}'}
        messages += [{"role": "assistant", "content": None, "tool_calls": [tool_call]},
                     {"role": "tool", "tool_call_id": tool_call["id"],
                      "content": '{"city": "Paris", "temp_c": 21}'}]
        assert _complete(client, messages, stream)["content"] == "It is 21 °C."
    assert [len(b["messages"]) for b in stand_in.bodies] == [1, 3]


def _complete(client: Any, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    if not stream:
        done = client.chat.completions.create(model="m", messages=messages, tools=WEATHER)
        return dict(done.choices[0].message.model_dump())
    content, calls = "", {}
    for chunk in client.chat.completions.create(model="m", messages=messages, tools=WEATHER,
                                                stream=True):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for c in choice.delta.tool_calls or []:
                calls[c.index] = {"id": c.id, "type": "function", "function": {
                    "name": c.function.name, "arguments": c.function.arguments}}
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)] or None}


def test_the_environment_points_at_the_stand_in_only_while_it_is_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "mine")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ZeroDivisionError), ChatStandIn([say("hi")]) as stand_in:
        assert os.environ["OPENAI_BASE_URL"] == stand_in.base_url
        assert os.environ["OPENAI_API_KEY"] == "byref-stand-in"
        raise ZeroDivisionError
    assert os.environ["OPENAI_API_KEY"] == "mine" and "OPENAI_BASE_URL" not in os.environ
    with pytest.raises(RuntimeError, match=r"^The stand-in is not running; use it as "):
        stand_in.base_url  # noqa: B018


def test_a_script_that_runs_out_is_an_error_the_client_hears_with_the_reason() -> None:
    with ChatStandIn([say("only one")]) as stand_in:
        client = _client(stand_in)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
        assert info.value.body["message"].startswith(
            "The stand-in's script failed: The script has 1 steps and all were played")
        with pytest.raises(openai.NotFoundError) as missing:
            client.responses.create(model="m", input="hi")
        assert missing.value.body["message"] == (
            "The stand-in answers only /v1/chat/completions, not '/v1/responses'.")


_text = st.text(max_size=20)
_call = st.fixed_dictionaries({"id": st.text(min_size=1, max_size=8), "name": _text,
                               "args": st.dictionaries(_text, st.integers(), max_size=3)})
_turn = st.lists(_call, min_size=1, max_size=3)


@given(system=_text, question=_text, turns=st.lists(_turn, max_size=3))
def test_a_request_reads_back_every_call_and_result_in_order(
        system: str, question: str, turns: list[list[dict[str, Any]]]) -> None:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": [{"type": "text",
                                                                    "text": question}]}]
    for calls in turns:
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
            for c in calls]})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": json.dumps(c["args"])}
                     for c in calls]
    request = request_from_chat({"messages": messages, "tools": WEATHER})
    assert request.system == system and request.tools == tuple(WEATHER)
    assert request.messages[0].content[0].text == question
    rest = request.messages[1:]
    assert len(rest) == 2 * len(turns)
    for calls, asked, answered in zip(turns, rest[::2], rest[1::2], strict=True):
        assert [(b.id, b.name, b.input) for b in asked.content] == [
            (c["id"], c["name"], c["args"]) for c in calls]
        assert [(b.id, json.loads(b.text)) for b in answered.content] == [
            (c["id"], c["args"]) for c in calls]
