"""A requestState resumes only the call it was minted for (defect 13 of [trust II]).

A 2026-07-28 retry carrying a parked call's requestState answered with that call's result under
another tool name and other arguments. The state is bound to a digest of the call — method,
name or URI, arguments — so a retry of anything else is refused in one clear line, and the
parked call still waits for, and answers, its own retry. A state is good for one retry (each
round mints its own); an upstream question for a capability the client did not declare fails its
call with -32021; a call left waiting on its client does not keep another call's question from
being attributed.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running, text
from mcp import Client
from mcp.shared.exceptions import MCPError

from _waits import scaled
from byref.gateway.passthrough.uris import namespaced
from byref.gateway.upstream.modern.inputs import binding

pytestmark = pytest.mark.anyio
OTHER_CALL = (
    "This requestState was issued for another call: retry with the same method, name or URI and "
    "arguments as the call that returned it, or make this call again without a requestState.")


def _fixture(script: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / script)], "timeout": scaled(20)}


async def _sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
    return _sampled("asked by the client's own loop")  # advertises sampling; unused by hand


async def _elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(action="accept", content={"name": "ada"})


def _sampled(text_out: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text=text_out))


async def test_a_tool_calls_state_is_refused_for_another_tool_or_other_arguments(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": _fixture("conformance_server.py")}) as (
                _g, server), Client(server, sampling_callback=_sampling) as c:
            assert c.protocol_version == "2026-07-28"
            first = await c.session.call_tool("conformance__test_sampling", {"prompt": "mine"},
                                              allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            state = first.request_state
            responses = {k: _sampled("parked answer") for k in first.input_requests}
            for name, arguments in [("conformance__test_elicitation", {"message": "mine"}),
                                    ("conformance__test_sampling", {"prompt": "another"}),
                                    ("conformance__test_sampling", {})]:
                with pytest.raises(MCPError) as err:
                    await c.session.call_tool(name, arguments, request_state=state,
                                              input_responses=responses,  # type: ignore[arg-type]
                                              allow_input_required=True)
                assert err.value.error.message == OTHER_CALL, (name, arguments)
            # The parked call still waits for its own retry, and answers it.
            done = await c.session.call_tool("conformance__test_sampling", {"prompt": "mine"},
                                             request_state=state,
                                             input_responses=responses,  # type: ignore[arg-type]
                                             allow_input_required=True)
            assert isinstance(done, types.CallToolResult)
            assert text(done) == "LLM response: parked answer"


async def test_a_reads_state_is_refused_for_another_uri(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": _fixture("passthrough_server.py")}) as (
                _g, server), Client(server, sampling_callback=_sampling,
                                    elicitation_callback=_elicitation) as c:
            asked = namespaced("many", "ask://name")
            first = await c.session.read_resource(asked, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            with pytest.raises(MCPError) as err:
                await c.session.read_resource(namespaced("many", "item://3"),
                                              request_state=first.request_state,
                                              allow_input_required=True)
            assert err.value.error.message == OTHER_CALL


def test_the_binding_is_the_call_not_what_a_retry_carries_beside_it() -> None:
    plain = types.CallToolRequestParams(name="t", arguments={"a": 1, "b": [1, 2]})
    retry = types.CallToolRequestParams.model_validate({
        "name": "t", "arguments": {"b": [1, 2], "a": 1}, "requestState": "s",
        "_meta": {"progressToken": 3}}, by_name=False)
    assert binding("tools/call", plain) == binding("tools/call", retry)
    assert binding("tools/call", types.CallToolRequestParams(name="t")) == binding(
        "tools/call", types.CallToolRequestParams(name="t", arguments={}))
    for other in [types.CallToolRequestParams(name="u", arguments={"a": 1, "b": [1, 2]}),
                  types.CallToolRequestParams(name="t", arguments={"a": 2, "b": [1, 2]})]:
        assert binding("tools/call", other) != binding("tools/call", plain)
    assert binding("prompts/get", types.GetPromptRequestParams(name="t")) != binding(
        "tools/call", types.CallToolRequestParams(name="t"))


NO_STATE = ("This requestState names no call waiting for input here (it finished, expired, or "
            "belongs to another session); call the tool again without it.")


async def test_a_state_is_good_for_one_retry_and_each_round_has_its_own(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": _fixture("conformance_server.py")}) as (
                _g, server), Client(server, elicitation_callback=_elicitation) as c:
            name = "conformance__test_input_required_result_multi_round"
            first = await c.session.call_tool(name, {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            (key,) = first.input_requests
            ada = {key: types.ElicitResult(action="accept", content={"name": "ada"})}
            second = await c.session.call_tool(name, {}, request_state=first.request_state,
                                               input_responses=ada,  # type: ignore[arg-type]
                                               allow_input_required=True)
            assert isinstance(second, types.InputRequiredResult)
            assert second.request_state != first.request_state
            (key2,) = second.input_requests
            assert key2 != key
            # The first round's state was used: it resumes nothing now.
            with pytest.raises(MCPError) as err:
                await c.session.call_tool(name, {}, request_state=first.request_state,
                                          input_responses=ada,  # type: ignore[arg-type]
                                          allow_input_required=True)
            assert err.value.error.message == NO_STATE
            blue = {key2: types.ElicitResult(action="accept", content={"color": "blue"})}
            done = await c.session.call_tool(name, {}, request_state=second.request_state,
                                             input_responses=blue,  # type: ignore[arg-type]
                                             allow_input_required=True)
            assert isinstance(done, types.CallToolResult) and text(done) == "ada likes blue"


async def test_a_capability_the_client_did_not_declare_fails_the_call_naming_it(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": _fixture("conformance_server.py")}) as (
                _g, server), Client(server) as c:  # declares neither sampling nor elicitation
            assert c.protocol_version == "2026-07-28"
            with pytest.raises(MCPError) as err:
                await c.session.call_tool("conformance__test_missing_capability", {},
                                          allow_input_required=True)
            assert err.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert err.value.error.data == {"requiredCapabilities": {"sampling": {}}}
            assert err.value.error.message == (
                "The tool's server needs the client capabilities ['sampling'], which this "
                "request's io.modelcontextprotocol/clientCapabilities does not declare.")


async def test_a_call_asleep_on_its_client_leaves_the_next_question_to_the_call_awake(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": _fixture("conformance_server.py")}) as (
                _g, server), Client(server, sampling_callback=_sampling,
                                    elicitation_callback=_elicitation) as c:
            left = await c.session.call_tool("conformance__test_elicitation", {"message": "hi"},
                                             allow_input_required=True)
            assert isinstance(left, types.InputRequiredResult)  # never retried: asleep
            asked = await c.session.call_tool("conformance__test_sampling", {"prompt": "p"},
                                              allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult), text(asked)
            (key,) = asked.input_requests
            assert asked.input_requests[key].method == "sampling/createMessage"
            done = await c.session.call_tool(
                "conformance__test_sampling", {"prompt": "p"}, request_state=asked.request_state,
                input_responses={key: _sampled("awake")},  # type: ignore[arg-type]
                allow_input_required=True)
            assert isinstance(done, types.CallToolResult) and text(done) == "LLM response: awake"


async def test_a_prompt_needing_a_capability_the_client_did_not_declare_fails_naming_it(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": _fixture("conformance_server.py")}) as (
                _g, server), Client(server) as c:  # declares no elicitation
            with pytest.raises(MCPError) as err:
                await c.session.get_prompt("conformance__test_input_required_result_prompt",
                                           allow_input_required=True)
            assert err.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            assert err.value.error.data == {"requiredCapabilities": {"elicitation": {}}}
