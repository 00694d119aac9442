"""Tool metadata passes (title, annotations, icons, _meta: on declarations and in search rows);
byref.callTool keeps call_tool from running round a client's permission prompt; direct mode and
alwaysLoad; byref's read tools declare anthropic/maxResultSizeChars and stay under it."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running
from mcp import Client

from _waits import scaled
from byref.gateway.catalog.metadata import MAX_RESULT_SIZE_CHARS
from byref.harness.tokens import count_tokens

pytestmark = pytest.mark.anyio
CLAUDE_CODE_SPILL_TOKENS = 25_000

ERASE = {"title": "Erase everything",
         "annotations": {"readOnlyHint": False, "destructiveHint": True},
         "icons": [{"src": "https://example.com/erase.png", "mimeType": "image/png"}],
         "_meta": {"example.com/owner": "media-team"}}


def _media() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / "media_server.py")],
            "timeout": scaled(30)}


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def _metadata(tool: types.Tool) -> dict[str, Any]:
    dumped = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {k: dumped[k] for k in ("title", "annotations", "icons", "_meta") if k in dumped}


async def test_metadata_passes_on_declarations_and_in_search_rows(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}) as (_gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools grow by activation
            found = json.loads(_text(await client.call_tool(
                "search_tools", {"query": "erase every record"})))
            row = next(r for r in found["results"] if r["name"] == "media__erase")
            assert {k: row[k] for k in ERASE} == ERASE
            peek_row = json.loads(_text(await client.call_tool(
                "search_tools", {"query": "peek at the records"})))["results"]
            peek = next(r for r in peek_row if r["name"] == "media__peek")
            assert peek["annotations"] == {"readOnlyHint": True} and peek["title"] == "Peek"

            await client.call_tool("activate_tool", {"names": ["media__erase", "media__peek"]})
            declared = {t.name: t for t in (await client.list_tools()).tools}
            assert _metadata(declared["media__erase"]) == ERASE
            assert _metadata(declared["media__peek"]) == {
                "title": "Peek", "annotations": {"readOnlyHint": True}}
            assert _metadata(declared["present"]) == {}


async def test_read_tools_declare_max_result_size_and_answer_under_it(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}) as (_gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools grow by activation
            declared = {t.name: t for t in (await client.list_tools()).tools}
            assert declared["read_result"].meta == {
                "anthropic/maxResultSizeChars": MAX_RESULT_SIZE_CHARS}
            big = await client.call_tool("call_tool", {"name": "media__big_weather"})
            placed = json.loads(_text(big))
            assert placed["placed"] is True
            read = await client.call_tool("read_result", {"ref": placed["value"]})
            assert not read.is_error, _text(read)
            answer = _text(read)
            assert json.loads(answer)["coverage"]  # a page of a larger whole, said so
            assert len(answer) <= MAX_RESULT_SIZE_CHARS
            assert count_tokens(answer) < CLAUDE_CODE_SPILL_TOKENS
            await client.call_tool("activate_tool", {"names": ["read_json", "query_json"]})
            declared = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("read_json", "query_json"):
                assert declared[name].meta == {
                    "anthropic/maxResultSizeChars": MAX_RESULT_SIZE_CHARS}


async def test_call_tool_read_only_runs_only_read_only_tools(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}, callTool="readOnly") as (
                _gateway, server), Client(server) as client:
            peek = await client.call_tool("call_tool", {"name": "media__peek"})
            assert not peek.is_error and _text(peek) == "3 records"
            erase = await client.call_tool("call_tool", {"name": "media__erase"})
            assert erase.is_error
            assert _text(erase) == (
                "call_tool runs only read-only tools here (byref.callTool is 'readOnly'); "
                "'media__erase' may change things: load it with activate_tool and call it by "
                "its own name, so your client can ask the user first.")
            unannotated = await client.call_tool("call_tool", {"name": "media__screenshot"})
            assert unannotated.is_error  # no readOnlyHint: it may change things
            await client.call_tool("activate_tool", {"names": ["media__erase"]})
            direct = await client.call_tool("media__erase", {})
            assert not direct.is_error and _text(direct) == "erased"


async def test_call_tool_off_is_not_declared_and_not_run(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}, callTool="off") as (
                _gateway, server), Client(server) as client:
            declared = {t.name for t in (await client.list_tools()).tools}
            assert "call_tool" not in declared
            refused = await client.call_tool("call_tool", {"name": "media__peek"})
            assert refused.is_error and "call_tool" in _text(refused)


async def test_direct_mode_declares_every_upstream_tool_with_its_metadata(
        world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}, mode="direct") as (
                gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools grow with a stored result
            await gateway.toolbox()  # listed (a first list does not wait for servers starting)
            declared = {t.name: t for t in (await client.list_tools()).tools}
            media = sorted(n for n in declared if n.startswith("media__"))
            assert media == ["media__beep", "media__big_weather", "media__erase", "media__link",
                             "media__long_note", "media__note", "media__peek",
                             "media__screenshot", "media__weather"]
            assert "call_tool" not in declared  # direct mode's default callTool is 'off'
            assert {"read_result", "present"} <= set(declared)
            # The JSON readers, as in search mode, come with the first stored result.
            assert not {"read_json", "query_json"} & set(declared)
            assert _metadata(declared["media__erase"]) == ERASE
            peek = await client.call_tool("media__peek", {})
            assert not peek.is_error and _text(peek) == "3 records"
            # Refs and placement still apply to a directly declared tool.
            big = await client.call_tool("media__big_weather", {})
            assert json.loads(_text(big))["placed"] is True
            declared = {t.name: t for t in (await client.list_tools()).tools}
            assert {"read_json", "query_json"} <= set(declared)


async def test_always_load_pins_tools_in_search_mode(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with running(world, {"media": _media()}, alwaysLoad=["media__p*",
                                                                   "media__weather"]) as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()  # listed (a first list does not wait for servers starting)
            declared = {t.name for t in (await client.list_tools()).tools}
            assert {n for n in declared if n.startswith("media__")} == {
                "media__peek", "media__weather"}
            assert "search_tools" in declared and "call_tool" in declared
