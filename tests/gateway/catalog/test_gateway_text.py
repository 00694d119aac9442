"""Text is delivered byte for byte: a JSON-shaped file read through the filesystem server reaches
the client exactly as it is on disk (`1.50`, `1e2`, a duplicate key, `\\u00e9` escapes), an edit
with a line the model saw matches, and a large one copied by ref is written back identical.
JSON inside text is parsed on demand (read_json / query_json), never by replacing the text."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled
from byref.gateway.catalog.convert import result_value

pytestmark = pytest.mark.anyio

PRETTY = (
    '{\n'
    '  "price": 1.50,\n'
    '  "count": 1e2,\n'
    '  "name": "Caf\\u00e9 \\"quoted\\" \\/ tab\\t",\n'
    '  "name": "the duplicate wins in a parser, not here",\n'
    '  "nested": {\n'
    '    "ratios": [1.0, 2.50, -0.0, 12345678901234567890]\n'
    '  }\n'
    '}\n'
)


def _record(number: int) -> str:
    return (f'  {{\n    "id": {number},\n    "price": 1.50,\n    "count": 1e2,\n'
            f'    "label": "Caf\\u00e9 n\\u00ba{number} \\"x\\"",\n    "label": "dup",\n'
            f'    "tags": ["a", "b\\/c"]\n  }}')


def _large(target: int) -> str:
    records: list[str] = []
    size = 4
    while size < target:
        records.append(_record(len(records)))
        size += len(records[-1]) + 2
    return "[\n" + ",\n".join(records) + "\n]\n"


def test_a_text_block_is_recorded_as_the_exact_string() -> None:
    for sent in (PRETTY, "[{'a': 1, 'b': None}]", "  [1, 2]  ", "{not json", "plain"):
        value = result_value(types.CallToolResult(content=[types.TextContent(
            type="text", text=sent)]), server="s", tool="t")
        assert value == sent and isinstance(value, str)


async def test_json_shaped_text_reaches_the_client_byte_for_byte_and_edits_match(
        world: World) -> None:
    servers = world.need("filesystem")
    path = world.files / "prices.json"
    path.write_text(PRETTY)
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            read = await client.call_tool("call_tool", {
                "name": "filesystem__read_text_file", "arguments": {"path": str(path)}})
            assert not read.is_error, text(read)
            assert text(read) == PRETTY
            state = gateway.scopes.state(gateway.scopes.stdio_scope)
            seq = state.transcript.last_seq
            assert seq is not None and state.transcript.part(seq, 0).value == PRETTY
            seen = next(line for line in text(read).splitlines() if "1.50" in line)
            edited = await client.call_tool("call_tool", {
                "name": "filesystem__edit_file", "arguments": {
                    "path": str(path), "edits": [{"oldText": seen,
                                                  "newText": '  "price": 2.75,'}]}})
            assert not edited.is_error, text(edited)
            assert path.read_text() == PRETTY.replace('"price": 1.50', '"price": 2.75')
            # The recorded text is a string; a ref to it is the string, parsed only on demand.
            parsed = await client.call_tool("read_json", {
                "source": {"$ref": {"type": "Message", "seq": seq, "part": 0}},
                "path": "/nested/ratios"})
            assert not parsed.is_error, text(parsed)
            assert not parsed.is_error, text(parsed)
            assert json.loads(text(parsed))["shape"].startswith("JSON array, 4 items")


async def test_a_140kb_json_file_copied_by_ref_is_byte_identical(world: World) -> None:
    servers = world.need("filesystem")
    original = _large(142_900)
    assert 140_000 < len(original.encode()) < 146_000
    source = world.files / "big.json"
    source.write_text(original)
    copies = {"message": world.files / "copy-message.json",
              "blob": world.files / "copy-blob.json"}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools follow its working set
            declared = {t.name for t in (await client.list_tools()).tools}
            assert not declared & {"read_json", "query_json"}  # behind search on turn one
            read = await client.call_tool("call_tool", {
                "name": "filesystem__read_text_file", "arguments": {"path": str(source)}})
            assert not read.is_error, text(read)
            # The stored result's note names the JSON readers: from now on they are declared.
            declared = {t.name for t in (await client.list_tools()).tools}
            assert {"read_json", "query_json"} <= declared
            placed: dict[str, Any] = json.loads(text(read))
            assert placed["bytes"] == len(original.encode())
            assert placed["shape"] == f"text, {len(original):,} chars"
            lines = set(original.splitlines())
            assert placed["preview"] and all(ln in lines for ln in placed["preview"].splitlines())
            seq = gateway.scopes.state(gateway.scopes.stdio_scope).transcript.last_seq
            refs = {"message": {"$ref": {"type": "Message", "seq": seq, "part": 0,
                                         "field": "value"}},
                    "blob": placed["value"]}
            for how, ref in refs.items():
                written = await client.call_tool("call_tool", {
                    "name": "filesystem__write_file",
                    "arguments": {"path": str(copies[how]), "content": ref}})
                assert not written.is_error, text(written)
            queried = await client.call_tool("query_json", {
                "source": placed["value"], "filter": [{"field": "id", "eq": 7}]})
            for copy in copies.values():
                assert copy.read_bytes() == original.encode()
            assert not queried.is_error, text(queried)
            assert json.loads(text(queried))["count"] == 1
