"""Search instead of declaration: the upstream catalog behind search_tools, activation announced
to both protocol generations, call_tool without activation, and re-indexing on list changes."""

from __future__ import annotations

import json
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled
from byref.gateway.catalog.convert import distinct_name
from byref.store import Scope

pytestmark = pytest.mark.anyio

SCAFFOLDING = ["activate_tool", "call_tool", "present", "read_result", "search_tools"]


async def test_first_turn_is_the_scaffolding_and_search_finds_git_log(world: World) -> None:
    servers = world.need("git", "time")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            await gateway.toolbox()  # listed (a first list does not wait for servers starting)
            listed = await client.list_tools()
            assert sorted(t.name for t in listed.tools) == SCAFFOLDING
            search = next(t for t in listed.tools if t.name == "search_tools")
            roots = "<tool_capabilities>data, git, time</tool_capabilities>"
            assert roots in (search.description or "")
            assert "search_tools" in (client.instructions or "")
            found = json.loads(text(await client.call_tool(
                "search_tools", {"query": "show recent commits"})))
            assert found["results"][0]["name"] == "git__git_log"
            # A search declares nothing.
            assert sorted(t.name for t in (await client.list_tools()).tools) == SCAFFOLDING


async def test_activation_is_announced_to_a_handshake_era_client(world: World) -> None:
    servers = world.need("git")
    notices: list[Any] = []
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notices.append(message)
            changed.set()

    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(
                server, mode="legacy", message_handler=on_message) as client:
            assert client.protocol_version not in ("2026-07-28",)
            await client.list_tools()
            result = await client.call_tool("activate_tool", {"names": ["git__git_log"]})
            assert not result.is_error, text(result)
            await changed.wait()
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert "git__git_log" in listed
            log = await client.call_tool("git__git_log", {"repo_path": str(world.repo)})
            assert not log.is_error, text(log)
            assert "Add note 2" in text(log)
            assert len(notices) == 1


async def test_a_2026_07_28_client_is_answered_with_the_declaration_not_a_longer_list(
        world: World) -> None:
    servers = world.need("git")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            assert client.protocol_version == "2026-07-28"
            await gateway.toolbox()  # settled: the search_tools note names no server starting
            before = await client.list_tools(cache_mode="bypass")
            result = await client.call_tool("activate_tool", {"names": ["git__git_log"]})
            declared = json.loads(text(result))["declarations"]
            assert [d["name"] for d in declared] == ["git__git_log"]
            assert "repo_path" in declared[0]["input_schema"]["properties"]
            after = await client.list_tools(cache_mode="bypass")
            assert after.tools == before.tools
            assert sorted(t.name for t in after.tools) == SCAFFOLDING


async def test_an_unknown_name_activates_nothing_and_says_what_is_close(world: World) -> None:
    servers = world.need("git")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            result = await client.call_tool("activate_tool", {"names": ["git__git_logs"]})
            assert result.is_error
            assert text(result).startswith(
                "Tool 'activate_tool' could not complete: There is no tool 'git__git_logs' in "
                "the catalog (did you mean 'git__git_log'")
            assert sorted(t.name for t in (await client.list_tools()).tools) == SCAFFOLDING


async def test_call_tool_runs_any_catalog_tool_without_activating_it(world: World) -> None:
    servers = world.need("time", "git")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            result = await client.call_tool("call_tool", {
                "name": "time__convert_time",
                "arguments": {"source_timezone": "UTC", "time": "12:00",
                              "target_timezone": "Asia/Tokyo"}})
            assert not result.is_error, text(result)
            assert json.loads(text(result))["target"]["datetime"].endswith("T21:00:00+09:00")
            assert sorted(t.name for t in (await client.list_tools()).tools) == SCAFFOLDING
            missing = await client.call_tool("call_tool", {"name": "time__convert_tim"})
            assert missing.is_error
            assert text(missing).startswith(
                "There is no tool 'time__convert_tim' in the catalog (did you mean "
                "'time__convert_time'")
            direct = await client.call_tool("call_tool", {"name": "search_tools",
                                                          "arguments": {"query": "time"}})
            assert text(direct) == ("call_tuol runs catalog tools; 'search_tools' is declared "
                                    "to you: call it directly.").replace("tuol", "tool")


async def test_proxied_tools_accept_refs_and_drop_their_output_schema(world: World) -> None:
    servers = world.need("filesystem")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(
                server, mode="legacy") as client:  # the list a handshake-era client is declared
            await client.call_tool("activate_tool", {"names": ["filesystem__write_file"]})
            tool = next(t for t in (await client.list_tools()).tools
                        if t.name == "filesystem__write_file")
            upstream = (await gateway.upstreams["filesystem"].list_tools())
            assert next(t for t in upstream if t.name == "write_file").output_schema
            assert tool.output_schema is None
            # One shared ref definition; each data parameter points to it.
            content = tool.input_schema["properties"]["content"]
            assert content["anyOf"] == [{"type": "string"}, {"$ref": "#/$defs/ref"}]
            assert tool.input_schema["$defs"]["ref"]["required"] == ["$ref"]
            check = jsonschema.Draft202012Validator(tool.input_schema)
            ref = {"$ref": {"type": "Message", "seq": 1, "part": 0}}
            assert not list(check.iter_errors({"path": "a.txt", "content": ref}))
            assert not list(check.iter_errors({"path": "a.txt", "content": "text"}))


async def test_an_upstream_list_change_is_reindexed_and_announced(world: World) -> None:
    notices = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notices.set()

    servers = {"garden": world.fixture("changing.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server):
            async with Client(server, mode="legacy", message_handler=on_message) as client:
                await client.list_tools()
                idle = gateway.scopes.state(Scope("someone-idle"))
                await gateway.call(idle, "search_tools", {"query": "garden"})
                assert idle.call_session is not None
                before = json.loads(text(await client.call_tool(
                    "search_tools", {"query": "water the seedling"})))
                assert before["results"] == []
                grown = await client.call_tool("call_tool", {"name": "garden__grow"})
                assert text(grown) == "now 2 tools"
                await notices.wait()
                box = await gateway.toolbox()
                while "garden__water_seedling_1" not in box.catalog:
                    await anyio.wait_all_tasks_blocked()
                    box = await gateway.toolbox()
                after = json.loads(text(await client.call_tool(
                    "search_tools", {"query": "water the seedling"})))
                assert [r["name"] for r in after["results"]] == ["garden__water_seedling_1"]
                assert idle.call_session is None  # an idle scope does not pin the old toolbox
                assert gateway.scopes.state(gateway.scopes.stdio_scope).connections == 1
            # The client is gone: its connection is forgotten, not kept for the next notice.
            assert gateway.scopes.state(gateway.scopes.stdio_scope).connections == 0


async def test_searches_that_end_in_an_activation_teach_the_next_gateway(world: World) -> None:
    servers = world.need("git", "time")
    usage = world.root / "usage.jsonl"
    queries = ["recent commits for the changelog", "changelog commits",
               "which commits go in the changelog"]
    with anyio.fail_after(scaled(60)):
        async with running(world, servers, usage=str(usage)) as (_gateway, server), Client(
                server) as client:
            before = json.loads(text(await client.call_tool("search_tools",
                                                             {"query": "changelog"})))
            assert before["results"] == []
            for query in queries:
                found = json.loads(text(await client.call_tool("search_tools",
                                                               {"query": query})))
                assert "git__git_log" in [row["name"] for row in found["results"]]
                result = await client.call_tool("activate_tool", {"names": ["git__git_log"]})
                assert not result.is_error, text(result)
            refused = await client.call_tool("activate_tool", {"names": ["git__nope"]})
            assert refused.is_error
        lines = [json.loads(line) for line in usage.read_text("utf-8").splitlines()]
        assert lines == [{"query": q, "tool": "git__git_log"} for q in queries]
        async with running(world, servers, usage=str(usage)) as (_gateway, server), Client(
                server) as client:
            after = json.loads(text(await client.call_tool("search_tools",
                                                           {"query": "changelog"})))
            assert after["results"][0]["name"] == "git__git_log"
            assert after["results"][0]["description"].startswith("Glossary: changelog")


async def test_a_damaged_usage_log_is_reported_and_the_gateway_serves_anyway(
        world: World) -> None:
    servers = world.need("time")
    usage = world.root / "usage.jsonl"
    usage.write_text('{"query": "x", "tool": "time__get_current_time"}\n{oops\n{}\n', "utf-8")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers, usage=str(usage)) as (_gateway, server), Client(
                server) as client:
            found = json.loads(text(await client.call_tool(
                "search_tools", {"query": "current time"})))
            assert found["results"][0]["name"] == "time__get_current_time"
    assert (f"byref gateway: usage log not learned from: {str(usage)!r} line 2 is not JSON"
            in world.log.read_text("utf-8"))


async def test_servers_whose_names_join_alike_keep_every_tool(world: World) -> None:
    # 'bad-one' and 'bad_one' both qualify 'echo' as 'bad-one__echo': a joined key.
    servers = {"bad-one": world.fixture("misbehaving.py"),
               "bad_one": world.fixture("misbehaving.py")}
    second = distinct_name("bad_one", "echo")
    assert second.startswith("bad-one__echo_") and len(second) == len("bad-one__echo_") + 8
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            box = await gateway.toolbox()
            assert {"bad-one__echo", second} <= set(box.catalog.names)
            assert box.catalog.entry(second).server == "bad_one"
            for name in ("bad-one__echo", second):
                echoed = await client.call_tool("call_tool", {
                    "name": name, "arguments": {"text": "hi"}})
                assert not echoed.is_error, text(echoed)
            assert gateway.upstreams["bad-one"].starts == gateway.upstreams["bad_one"].starts == 1
