"""Every server feature passes through the gateway: resources, prompts, completion, logging,
progress, cancellation, and sampling / elicitation / roots answered by the calling client.

Driven by the official `mcp` client against `@modelcontextprotocol/server-everything` (npm) and
two fixtures of our own (`conformance_server.py` for logs and subscriptions, `passthrough_server.py`
for long paginated lists and cancellation), with the gateway in-process.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running, text
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from _waits import scaled
from byref.gateway.passthrough.pages import PAGE
from byref.gateway.passthrough.uris import namespaced

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]
EVERYTHING = ROOT / "node_modules" / ".bin" / "mcp-server-everything"
STATIC = "demo://resource/static/document/architecture.md"
GENERATIONS = ["legacy", "auto"]  # the handshake era, and 2026-07-28 (what auto negotiates)


@contextlib.contextmanager
def deprecated_ok() -> Iterator[None]:
    """Logging, roots and resources/subscribe: deprecated for 2026-07-28 only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


def everything() -> dict[str, Any]:
    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything comes from npm: run `make upstreams`")
    return {"everything": {"command": str(EVERYTHING), "args": ["stdio"], "timeout": scaled(30)}}


def fixture(script: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / script)], "timeout": scaled(20)}


async def _all_resources(client: Client) -> list[types.Resource]:
    out: list[types.Resource] = []
    cursor: str | None = None
    for _ in range(20):
        got = await client.list_resources(cursor=cursor)
        out.extend(got.resources)
        if not (cursor := got.next_cursor):
            break
    return out


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_resources_are_listed_per_server_and_read_back(world: World, mode: str) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(server, mode=mode) as c:
            # every server up: a list answers without one starting
            await _g.toolbox(wait=scaled(30))
            listed = {str(r.uri) for r in await _all_resources(c)}
            assert namespaced("everything", STATIC) in listed
            assert all(u.startswith("byref://everything/") for u in listed)
            read = await c.read_resource(namespaced("everything", STATIC))
            assert str(read.contents[0].uri) == namespaced("everything", STATIC)
            assert isinstance(read.contents[0], types.TextResourceContents)
            own = await c.read_resource(STATIC)  # the server's own URI: one server offers it
            assert str(own.contents[0].uri) == STATIC
            assert own.contents[0].text == read.contents[0].text  # type: ignore[union-attr]
            templates = (await c.list_resource_templates()).resource_templates
            template = next(t.uri_template for t in templates if "dynamic/text" in t.uri_template)
            assert template == namespaced("everything", "demo://resource/dynamic/text/{resourceId}")
            filled = await c.read_resource(template.replace("{resourceId}", "7"))
            assert "7" in str(filled.contents[0].uri)


async def test_a_uri_no_server_offers_is_refused_saying_how_uris_are_named(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(server, mode="legacy") \
                as c:
            with pytest.raises(MCPError) as err:
                await c.read_resource("nowhere://x")
            assert err.value.error.message == (
                "Resource 'nowhere://x' is not offered by any server behind this gateway; "
                "resources/list names each as byref://<server>/<uri>.")
            assert err.value.error.data == {"uri": "nowhere://x"}  # SEP-2164's data.uri


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_prompts_are_named_like_tools_and_complete(world: World, mode: str) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(server, mode=mode) as c:
            # every server up: a list answers without one starting
            await _g.toolbox(wait=scaled(30))
            names = {p.name for p in (await c.list_prompts()).prompts}
            assert {"everything__simple-prompt", "everything__args-prompt"} <= names
            got = await c.get_prompt("everything__args-prompt", {"city": "Paris"})
            assert "Paris" in str(got.messages[0].content)
            same = await c.get_prompt("args-prompt", {"city": "Paris"})  # the server's own name
            assert same.messages == got.messages
            done = await c.complete(types.PromptReference(type="ref/prompt",
                                                          name="everything__completable-prompt"),
                                    {"name": "department", "value": "E"})
            assert done.completion.values and all(v.startswith("E")
                                                   for v in done.completion.values)


async def test_capability_gated_tools_stay_listed(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (gateway, _server):
            box = await gateway.toolbox()
            own = {e.original_name for e in box.catalog if e.server == "everything"}
            assert {"trigger-sampling-request", "trigger-elicitation-request",
                    "get-roots-list"} <= own


async def test_sampling_and_elicitation_are_answered_by_the_calling_client(world: World) -> None:
    asked: list[Any] = []

    async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params)
        return types.CreateMessageResult(role="assistant", model="test-model", content=(
            types.TextContent(type="text", text="the model's answer")))

    async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
        asked.append(params)
        return types.ElicitResult(action="decline")

    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(
                server, mode="legacy", sampling_callback=sampling,
                elicitation_callback=elicitation) as c:
            sampled = await c.call_tool("everything__trigger-sampling-request",
                                        {"prompt": "say hi", "maxTokens": 20})
            assert "the model's answer" in text(sampled)
            assert "say hi" in str(asked[0].messages[0].content)
            elicited = await c.call_tool("everything__trigger-elicitation-request", {})
            # The server's two text blocks, each in its place (never one JSON array), then the
            # result's ref line.
            declined, raw, line = elicited.content
            assert "decline" in declined.text.lower()  # type: ignore[union-attr]
            assert raw.text.startswith("\nRaw result: {")  # type: ignore[union-attr]
            assert re.fullmatch(r"\[ref r\d{1,9}\]", line.text)  # type: ignore[union-attr]
            assert len(asked) == 2


async def test_a_client_without_sampling_gets_the_servers_request_refused_saying_so(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": fixture("conformance_server.py")}) as (
                _g, server), Client(server, mode="legacy") as c:
            result = await c.call_tool("conformance__test_sampling", {"prompt": "x"})
            assert "the client connected to the gateway does not support sampling" in text(result)


async def test_roots_and_their_changes_reach_the_server(world: World) -> None:
    roots = [types.Root(uri="file:///first", name="first")]
    asked = anyio.Event()
    count = [0]

    async def list_roots(_: Any) -> types.ListRootsResult:
        count[0] += 1
        if count[0] > 1:
            asked.set()
        return types.ListRootsResult(roots=roots)

    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(
                server, mode="legacy", list_roots_callback=list_roots) as c:
            first = await c.call_tool("everything__get-roots-list", {})
            assert "file:///first" in text(first)
            roots.append(types.Root(uri="file:///second", name="second"))
            before = count[0]
            with deprecated_ok():
                await c.send_roots_list_changed()  # the server asks again, outside any call
            await asked.wait()
            assert count[0] > before
            second = await c.call_tool("everything__get-roots-list", {})
            assert "file:///second" in text(second)


async def test_progress_reaches_the_caller(world: World) -> None:
    seen: list[float] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(server, mode="legacy") \
                as c:
            result = await c.call_tool("everything__trigger-long-running-operation",
                                       {"duration": 0.4, "steps": 4}, progress_callback=progress)
            assert not result.is_error, text(result)
            assert len(seen) == 4 and seen == sorted(seen)


async def test_logs_are_forwarded_naming_the_server(world: World) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": fixture("conformance_server.py")}) as (
                _g, server), Client(server, mode="legacy", logging_callback=on_log) as c:
            with deprecated_ok():
                await c.set_logging_level("debug")
            await c.call_tool("conformance__test_tool_with_logging", {})
            assert [(m.logger, m.data) for m in logs] == [
                ("conformance/conformance", "Tool execution started"),
                ("conformance/conformance", "Tool processing data"),
                ("conformance/conformance", "Tool execution completed")]


async def test_resource_updates_reach_the_subscriber_under_the_uri_it_used(world: World) -> None:
    updates: list[str] = []
    got = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            got.set()

    uri = namespaced("conformance", "test://watched-resource")
    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": fixture("conformance_server.py")}) as (
                _g, server), Client(server, mode="legacy", message_handler=on_message) as c:
            with deprecated_ok():
                await c.subscribe_resource(uri)  # the fixture sends one update at once
            await got.wait()
            assert updates == [uri]
            with deprecated_ok():
                await c.unsubscribe_resource(uri)


async def test_the_gateways_lists_paginate_over_the_servers_pages(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server, mode="legacy") as c:
            # every server up: a list answers without one starting
            await _g.toolbox(wait=scaled(30))
            first = await c.list_resources()
            assert len(first.resources) == PAGE and first.next_cursor
            every = await _all_resources(c)
            assert [str(r.uri) for r in every] == [namespaced("many", f"item://{i}")
                                                   for i in range(250)]
            prompts: list[str] = []
            cursor: str | None = None
            for _ in range(5):
                page = await c.list_prompts(cursor=cursor)
                prompts.extend(p.name for p in page.prompts)
                if not (cursor := page.next_cursor):
                    break
            assert prompts == [f"many__p{i}" for i in range(120)]
            with pytest.raises(MCPError) as err:
                await c.list_resources(cursor="not-a-cursor")
            assert err.value.error.message == (
                "Invalid cursor 'not-a-cursor': pass back the nextCursor of the previous page.")


async def test_a_cancelled_call_is_cancelled_upstream(world: World) -> None:
    started = anyio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server, mode="legacy") as c:
            async with anyio.create_task_group() as group:
                async def call() -> None:
                    await c.call_tool("many__wait_for_cancel", {}, progress_callback=progress)

                group.start_soon(call)
                await started.wait()
                group.cancel_scope.cancel()
            answer = await c.call_tool("many__was_cancelled", {})
            assert text(answer) == "cancelled"


async def test_a_2026_client_is_asked_through_input_required_results(world: World) -> None:
    asked: list[str] = []

    async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(str(params.messages[0].content))
        return types.CreateMessageResult(role="assistant", model="test-model", content=(
            types.TextContent(type="text", text="modern answer")))

    async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
        return types.ElicitResult(action="accept", content={"username": "u", "email": "e@x"})

    with anyio.fail_after(scaled(60)):
        async with running(world, {"conformance": fixture("conformance_server.py")}) as (
                _g, server), Client(server, sampling_callback=sampling,
                                    elicitation_callback=elicitation) as c:
            assert c.protocol_version == "2026-07-28"
            sampled = await c.call_tool("conformance__test_sampling", {"prompt": "hello"})
            assert text(sampled) == "LLM response: modern answer"
            assert "hello" in asked[0]
            elicited = await c.call_tool("conformance__test_elicitation", {"message": "who?"})
            assert text(elicited) == ('User response: action=accept, content='
                                      '{"username": "u", "email": "e@x"}')
            # The first round by hand: the answer is the question, and a stale state is refused.
            first = await c.session.call_tool("conformance__test_sampling", {"prompt": "again"},
                                              allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            with pytest.raises(MCPError) as err:
                await c.session.call_tool("conformance__test_sampling", {"prompt": "again"},
                                          request_state="forged", allow_input_required=True)
            assert err.value.error.message.startswith(
                "This requestState names no call waiting for input here")


async def test_a_listen_stream_watches_its_resources_upstream(world: World) -> None:
    uri = namespaced("many", "item://3")
    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server) as c:
            assert c.protocol_version == "2026-07-28"
            async with c.listen(resource_subscriptions=[uri]) as subscription:
                touched = await c.call_tool("many__touch", {"uri": "item://3"})
                assert text(touched) == "touched"
                event = await subscription.__anext__()
            assert type(event).__name__ == "ResourceUpdated" and event.uri == uri


async def test_unsubscribing_the_last_subscriber_unsubscribes_upstream(world: World) -> None:
    uri = namespaced("many", "item://5")
    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server, mode="legacy") as c:
            with deprecated_ok():
                await c.subscribe_resource(uri)
            assert text(await c.call_tool("many__touch", {"uri": "item://5"})) == "touched"
            with deprecated_ok():
                await c.unsubscribe_resource(uri)
            assert text(await c.call_tool("many__touch", {"uri": "item://5"})) == "not subscribed"


async def test_a_template_argument_completes_on_its_server(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, everything()) as (_g, server), Client(server, mode="legacy") \
                as c:
            # every server up: a list answers without one starting
            await _g.toolbox(wait=scaled(30))
            templates = (await c.list_resource_templates()).resource_templates
            template = next(t.uri_template for t in templates if "dynamic/text" in t.uri_template)
            done = await c.complete(types.ResourceTemplateReference(type="ref/resource",
                                                                    uri=template),
                                    {"name": "resourceId", "value": "1"})
            assert done.completion.values and all(v.startswith("1")
                                                   for v in done.completion.values)


@pytest.mark.parametrize("mode", GENERATIONS)
async def test_prompts_and_reads_that_ask_their_client_are_answered(world: World,
                                                                    mode: str) -> None:
    async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(role="assistant", model="m", content=(
            types.TextContent(type="text", text="tides")))

    async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
        return types.ElicitResult(action="accept", content={"name": "ada"})

    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server, mode=mode, sampling_callback=sampling,
                                    elicitation_callback=elicitation) as c:
            got = await c.get_prompt("many__p1")
            assert got.messages[0].content.text == "Write about tides."  # type: ignore[union-attr]
            read = await c.read_resource(namespaced("many", "ask://name"))
            assert read.contents[0].text == "for ada"  # type: ignore[union-attr]


async def test_a_servers_prompt_list_change_reaches_a_client_that_listed_tools(
        world: World) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            changed.set()

    with anyio.fail_after(scaled(60)):
        async with running(world, {"many": fixture("passthrough_server.py")}) as (
                _g, server), Client(server, mode="legacy", message_handler=on_message) as c:
            await c.list_tools()
            await c.call_tool("many__change_prompts", {})
            await changed.wait()
