"""An upstream of the 2026-07-28 revision only (`fixtures/modern_only.py`: the SDK's server over
streamable HTTP, refusing `initialize`, answering `server/discover`) behind the gateway.

The gateway speaks to it in that revision: its tools are listed; a call whose `x-mcp-header`
parameter is a `$ref` reaches it resolved, header and body naming the same value (the server
compares them); a tool list change it announces on `subscriptions/listen` reaches the gateway's
clients of both generations; its `InputRequiredResult` is answered by a handshake-era client
(asked by a server→client request) and by a 2026-07-28 client (asked by the gateway's own
`InputRequiredResult`), the server's `requestState` coming back to it byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, ref_line_of, running, text
from mcp import Client
from mcp.server.caching import CacheHint

from _waits import scaled
from byref.gateway.edge.caching import LIST_TTL_MS
from byref.gateway.upstream.modern.era import modern_only
from byref.gateway.upstream.modern.hints import combined, hint_of

pytestmark = pytest.mark.anyio
GENERATIONS = ["legacy", "auto"]  # the handshake era, and 2026-07-28 (what auto negotiates)


def _served(script: str, *args: str) -> Iterator[str]:
    """`script` serving streamable HTTP on a free loopback port: its URL while it runs."""
    proc = subprocess.Popen([sys.executable, str(FIXTURES / script), "--http", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # bounded: the process prints it or exits
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=scaled(15))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=scaled(15))


@pytest.fixture
def modern_url() -> Iterator[str]:
    yield from _served("modern_only.py")


@pytest.fixture
def public_tools_url() -> Iterator[str]:
    yield from _served("modern_only.py", "--tools-hint", "30000:public")


@pytest.fixture
def private_tools_url() -> Iterator[str]:
    yield from _served("modern_only.py", "--tools-hint", "20000:private")


@pytest.fixture
def dual_era_url() -> Iterator[str]:
    yield from _served("conformance_server.py")


def _servers(url: str) -> dict[str, dict[str, Any]]:
    return {"modern": {"url": url, "timeout": scaled(20)}}


def _answering(name: str) -> Any:
    async def elicitation(_: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.message == "Who is asking?"
        return types.ElicitResult(action="accept", content={"name": name})
    return elicitation


async def _call(client: Client, name: str, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_modern_only_upstream_is_listed_and_its_header_carries_a_refs_value(
        world: World, modern_url: str, generation: str) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server, mode=generation) as client:
            await gateway.toolbox()
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"modern__pick_region", "modern__echo_region", "modern__ask"} <= names
            picked = await _call(client, "modern__pick_region")
            assert text(picked) == "eu-west-1"
            ref = ref_line_of(picked)
            assert ref is not None
            echoed = await _call(client, "modern__echo_region", region=ref)
            seen = json.loads(text(echoed))
            assert seen == {"mcp-method": "tools/call", "mcp-name": "echo_region",
                            "header": "eu-west-1", "body": "eu-west-1"}
            # A value the header must encode (not ASCII) arrives as it was given.
            odd = json.loads(text(await _call(client, "modern__echo_region", region="zürich ☃")))
            assert odd["header"] == odd["body"] == "zürich ☃"


async def test_its_list_change_on_subscriptions_listen_reaches_clients_of_both_generations(
        world: World, modern_url: str) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(scaled(60)):
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server, mode="legacy",
                                         message_handler=on_message) as old, Client(
                server) as new:
            assert new.protocol_version == "2026-07-28"
            await gateway.toolbox()
            before = {t.name for t in (await old.list_tools()).tools}
            assert "modern__extra" not in before
            async with new.listen(tools_list_changed=True) as subscription:
                await _call(old, "modern__grow")
                await changed.wait()  # the handshake-era client is told
                async for event in subscription:  # and the 2026-07-28 one, on its stream
                    assert isinstance(event, types.ToolListChangedNotification) or \
                        type(event).__name__ == "ToolsListChanged"
                    break
            for client in (old, new):
                names = {t.name for t in (await client.list_tools(
                    cache_mode="refresh")).tools}
                assert "modern__extra" in names
            assert text(await _call(new, "modern__extra")) == "extra ran"


async def test_a_listen_stream_that_ends_is_opened_again_and_the_lists_refetched(
        world: World, modern_url: str) -> None:
    told, heard = anyio.create_memory_object_stream[None](16)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            await told.send(None)

    with anyio.fail_after(scaled(60)):
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server, mode="legacy",
                                         message_handler=on_message) as client:
            await gateway.toolbox()
            await _call(client, "modern__end_streams")
            await heard.receive()  # listened again, refetched, and its clients told
            await _call(client, "modern__grow")
            await heard.receive()  # the new stream carries the next change
            names = {t.name for t in (await client.list_tools()).tools}
            assert "modern__extra" in names


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_its_input_required_round_is_answered_by_a_client_of_either_generation(
        world: World, modern_url: str, generation: str) -> None:
    who = f"{generation}-client"
    with anyio.fail_after(scaled(60)):
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server, mode=generation,
                                         elicitation_callback=_answering(who)) as client:
            await gateway.toolbox()
            answered = await _call(client, "modern__ask")
            # The server names who answered, and that its requestState came back unchanged.
            assert text(answered) == f"asked by {who}; state intact"


async def test_a_modern_client_sees_the_gateways_own_state_never_the_upstreams(
        world: World, modern_url: str) -> None:
    """A 2026-07-28 client is asked through the gateway's parked call: the requestState it holds
    is the gateway's, so the upstream's is never exposed, and the round still completes."""
    with anyio.fail_after(scaled(60)):
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server, elicitation_callback=_answering("-")) as client:
            await gateway.toolbox()
            first = await client.session.call_tool("modern__ask", {},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state is not None and "é" not in first.request_state
            (key,) = first.input_requests
            done = await client.session.call_tool(
                "modern__ask", {}, allow_input_required=True,
                input_responses={key: types.ElicitResult(action="accept",
                                                         content={"name": "ada"})},
                request_state=first.request_state)
            assert isinstance(done, types.CallToolResult), done
            assert text(done) == "asked by ada; state intact"


@pytest.mark.parametrize("generation", GENERATIONS)
async def test_a_stdio_server_refusing_the_handshake_is_started_again_in_2026_07_28(
        world: World, generation: str) -> None:
    """Over stdio the gateway starts in the handshake era (a dual-era server keeps its mid-call
    requests there); a server that refuses it naming only 2026-07-28 is spoken to in that."""
    with anyio.fail_after(scaled(60)):
        async with running(world, {"modern": world.fixture("modern_only.py", 20)},
                           mode="direct") as (gateway, server), Client(
                server, mode=generation, elicitation_callback=_answering("ada")) as client:
            await gateway.toolbox(wait=scaled(30))  # two starts: the refused one, then 2026-07-28
            assert text(await _call(client, "modern__pick_region")) == "eu-west-1"
            assert text(await _call(client, "modern__ask")) == "asked by ada; state intact"
            (upstream,) = gateway.upstreams["modern"].instances.values()
            assert upstream.mode == "auto"
            live = upstream.connected
            assert live is not None and live.protocol_version == "2026-07-28"


@pytest.mark.parametrize("protocol", ["auto", "handshake"])
async def test_a_dual_era_server_asking_mid_call_needs_the_handshake_generation(
        world: World, dual_era_url: str, protocol: str) -> None:
    """A server that speaks both generations over HTTP is spoken to in 2026-07-28, where its
    tool's mid-call elicitation has no channel and is refused in its own words; its entry's
    `"protocol": "handshake"` keeps it where that tool works."""
    async def elicitation(_: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"username": "ada", "email": "a@b"})

    servers = {"dual": {"url": dual_era_url, "timeout": scaled(20), "protocol": protocol}}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers, mode="direct") as (gateway, server), Client(
                server, mode="legacy", elicitation_callback=elicitation) as client:
            await gateway.toolbox(wait=scaled(30))
            (upstream,) = gateway.upstreams["dual"].instances.values()
            live = upstream.connected
            assert live is not None
            asked = await client.call_tool("dual__test_elicitation", {"message": "who?"})
            if protocol == "auto":
                assert live.protocol_version == "2026-07-28"
                assert asked.is_error
                assert "no back-channel for server-initiated requests" in text(asked)
            else:
                assert live.protocol_version == "2025-11-25"
                assert not asked.is_error, asked.content
                assert text(asked) == ('User response: action=accept, content='
                                       '{"username": "ada", "email": "a@b"}')


async def test_the_gateways_lists_promise_no_longer_than_its_modern_upstreams_do(
        world: World, public_tools_url: str, private_tools_url: str, modern_url: str) -> None:
    """Tool lists of 30 s public and 20 s private (the fixture's `--tools-hint`), resource
    lists of 5 s private: the gateway's tool list promises at most 20 s, private, its resource
    list at most 5 s; its prompt list, which no upstream has, keeps its own minute. A
    modern-only upstream that sets no hint is the SDK's 0 ms, private."""
    two = {"a": {"url": public_tools_url, "timeout": scaled(20)},
           "b": {"url": private_tools_url, "timeout": scaled(20)}}
    with anyio.fail_after(scaled(60)):
        async with running(world, two, mode="direct") as (gateway, server), Client(
                server) as client:
            await gateway.toolbox()
            tools = await client.list_tools(cache_mode="bypass")
            resources = await client.list_resources(cache_mode="bypass")
            prompts = await client.list_prompts(cache_mode="bypass")
            assert tools.cache_scope == "private" and tools.ttl_ms <= 20_000
            assert resources.cache_scope == "private" and resources.ttl_ms <= 5_000
            assert (prompts.ttl_ms, prompts.cache_scope) == (LIST_TTL_MS, "public")
        async with running(world, {"a": two["a"]}, mode="direct") as (gateway, server), Client(
                server) as client:
            await gateway.toolbox()
            tools = await client.list_tools(cache_mode="bypass")
            assert tools.cache_scope == "public" and tools.ttl_ms <= 30_000
        async with running(world, _servers(modern_url), mode="direct") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            tools = await client.list_tools(cache_mode="bypass")
            assert (tools.ttl_ms, tools.cache_scope) == (0, "private")


def test_an_answers_hint_is_its_pages_shortest_and_private_if_any_is() -> None:
    def page(**hint: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[], **hint)

    assert hint_of([page(), page()]) is None  # a handshake-era server says nothing
    assert hint_of([page(ttl_ms=9, cache_scope="public"), page()]) == CacheHint(9, "public")
    assert hint_of([page(ttl_ms=9, cache_scope="public"),
                    page(ttl_ms=4, cache_scope="public"),
                    page(ttl_ms=7, cache_scope="private")]) == CacheHint(4, "private")
    assert combined(None, None) is None
    assert combined(CacheHint(5, "public"), None) == CacheHint(5, "public")
    assert combined(CacheHint(5, "public"), CacheHint(8, "private")) == CacheHint(5, "private")


def test_only_a_refusal_naming_modern_versions_alone_switches_the_era() -> None:
    from mcp.shared.exceptions import MCPError

    def refusal(supported: Any) -> MCPError:
        return MCPError(types.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                        {"supported": supported, "requested": "2025-11-25"})

    assert modern_only(refusal(["2026-07-28"]))
    assert modern_only(ExceptionGroup("g", [ExceptionGroup("h", [refusal(["2026-07-28"])])]))
    assert not modern_only(refusal(["2026-07-28", "2025-11-25"]))
    assert not modern_only(refusal(["1999-01-01"]))
    assert not modern_only(refusal("2026-07-28"))
    assert not modern_only(MCPError(types.METHOD_NOT_FOUND, "no", {"supported": ["2026-07-28"]}))
    assert not modern_only(RuntimeError("Unsupported protocol version"))
