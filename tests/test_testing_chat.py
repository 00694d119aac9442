"""`byref.testing.ChatStandIn`: an OpenAI server on loopback (Chat Completions and Responses)
playing a byref script, driven by the real `openai` client (plain and streamed), and its request
readers under Hypothesis (one conversation reads the same from either wire)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.testing import ChatStandIn, call, last_result, parallel, say
from byref.testing.chat import request_from_chat
from byref.testing.responses import request_from_responses

openai = pytest.importorskip("openai", reason="needs the openai extra")

WEATHER = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
WEATHER_RESPONSES = [{"type": "function", "name": "weather", "strict": False,
                      **WEATHER[0]["function"]}]


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


@pytest.mark.parametrize("stream", [False, True])
def test_the_real_openai_client_gets_the_scripts_call_then_its_answer_over_responses(
        stream: bool) -> None:
    """The same script over `/v1/responses`: a `function_call` item with its `call_id`, then a
    `message` whose `output_text` reads the `function_call_output`; streamed, the `openai`
    client's own accumulator (`responses.stream`) rebuilds the same response from the events."""
    script = [call("weather", {"city": "Paris"}),
              lambda r: say(f"It is {last_result(r)['temp_c']} °C.")]
    with ChatStandIn(script, model="gpt-6.1-sol") as stand_in:
        client = _client(stand_in)
        items: list[dict[str, Any]] = [{"role": "user", "content": "Weather?"}]
        first = _respond(client, items, stream)
        [fc] = first.output
        assert (fc.type, fc.name, fc.arguments, fc.status) == (
            "function_call", "weather", '{"city": "Paris"}', "completed")
        assert first.output_text == "" and first.model == "gpt-6.1-sol"
        items += [fc.model_dump(exclude_none=True),
                  {"type": "function_call_output", "call_id": fc.call_id,
                   "output": '{"city": "Paris", "temp_c": 21}'}]
        second = _respond(client, items, stream)
        [message] = second.output
        assert (message.type, message.role, message.content[0].type) == (
            "message", "assistant", "output_text")
        assert second.output_text == "It is 21 °C." and second.status == "completed"
        assert second.usage is not None and second.usage.total_tokens == 0
    assert [len(b["input"]) for b in stand_in.bodies] == [1, 3]
    [seen_call] = stand_in.model.seen[1].messages[1].content
    assert (seen_call.id, seen_call.name) == (fc.call_id, "weather")


def _respond(client: Any, items: list[dict[str, Any]], stream: bool) -> Any:
    if not stream:
        return client.responses.create(model="gpt-6.1-sol", input=items,
                                       tools=WEATHER_RESPONSES, instructions="Be brief.")
    with client.responses.stream(model="gpt-6.1-sol", input=items, tools=WEATHER_RESPONSES,
                                 instructions="Be brief.") as events:
        kinds = [event.type for event in events]
        done = events.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    return done


def test_a_turn_of_text_and_calls_comes_back_as_one_message_and_its_calls_in_order() -> None:
    script = [parallel(say("Checking both."), call("weather", {"city": "Paris"}),
                       call("weather", {"city": "Oslo"}))]
    with ChatStandIn(script) as stand_in:
        done = _client(stand_in).responses.create(model="m", input="Weather?")
    assert [o.type for o in done.output] == ["message", "function_call", "function_call"]
    assert done.output_text == "Checking both."
    assert [o.arguments for o in done.output[1:]] == ['{"city": "Paris"}', '{"city": "Oslo"}']
    assert len({o.call_id for o in done.output[1:]}) == 2


@pytest.mark.parametrize(("item", "message"), [
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"},
     "The stand-in reads message, function_call, function_call_output and additional_tools "
     "input items, not 'web_search_call'."),
    ({"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{city"},
     "The function_call 'c1' has arguments that are not JSON: Expecting property name enclosed "
     "in double quotes: line 1 column 2 (char 1)."),
])
def test_an_input_item_the_stand_in_cannot_read_is_a_400_that_names_it(
        item: dict[str, Any], message: str) -> None:
    with ChatStandIn([say("unplayed")]) as stand_in:
        with pytest.raises(openai.BadRequestError) as info:
            _client(stand_in).responses.create(model="m", input=[item])
        assert info.value.body["message"] == message
        with pytest.raises(openai.BadRequestError) as stateful:
            _client(stand_in).responses.create(model="m", input="more",
                                               previous_response_id="resp_1")
        assert stateful.value.body["message"] == (
            "The stand-in keeps no responses: send the whole conversation as `input`, not "
            "'previous_response_id'.")
        assert _client(stand_in).responses.create(model="m", input="hi").output_text == (
            "unplayed")  # nothing was played for a request it could not read


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


def test_a_script_that_runs_out_is_an_error_the_client_hears_on_either_wire() -> None:
    with ChatStandIn([say("only one")]) as stand_in:
        client = _client(stand_in)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.InternalServerError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
        assert info.value.body["message"].startswith(
            "The stand-in's script failed: The script has 1 steps and all were played")
        with pytest.raises(openai.InternalServerError) as info:
            client.responses.create(model="m", input="c")
        assert info.value.body["message"].startswith(
            "The stand-in's script failed: The script has 1 steps and all were played")
        with pytest.raises(openai.NotFoundError) as missing:
            client.embeddings.create(model="m", input="hi")
        assert missing.value.body["message"] == ("The stand-in answers only /v1/chat/completions "
                                                 "and /v1/responses, not '/v1/embeddings'.")


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


@given(system=_text, question=_text, turns=st.lists(st.tuples(_text, _turn), max_size=3),
       added=st.lists(st.sampled_from(WEATHER_RESPONSES), max_size=2))
def test_a_conversation_reads_the_same_from_responses_items_as_from_chat_messages(
        system: str, question: str, turns: list[tuple[str, list[dict[str, Any]]]],
        added: list[dict[str, Any]]) -> None:
    """Instructions, a question, then turns of (text, calls) and their results, written once
    as Chat Completions messages and once as Responses items: the script reads one `Request`
    (tools aside, which each wire declares in its own shape)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": question}]
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text",
                                                                  "text": question}]}]
    for text, calls in turns:
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": json.dumps(c["args"])}}
            for c in calls]})
        if text:
            items.append({"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": text, "annotations": []}]})
        items += [{"type": "function_call", "call_id": c["id"], "name": c["name"],
                   "arguments": json.dumps(c["args"])} for c in calls]
        items.append({"type": "reasoning", "id": "rs_1", "summary": []})  # skipped
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"],
                             "content": json.dumps(c["args"])})
            items.append({"type": "function_call_output", "call_id": c["id"],
                          "output": json.dumps(c["args"])})
    items.append({"type": "additional_tools", "role": "developer", "tools": added})
    chat = request_from_chat({"messages": messages})
    responses = request_from_responses({"instructions": system, "input": items,
                                        "tools": WEATHER_RESPONSES})
    assert (responses.system, responses.messages) == (chat.system, chat.messages)
    assert responses.tools == (*WEATHER_RESPONSES, *added)
