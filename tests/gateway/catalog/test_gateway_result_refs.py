"""Every result the model sees can be passed on by ref; several blocks keep their type and place.

Driven by the official `mcp` client against a gateway over the blocks fixture
(tests/gateway/fixtures/blocks_server.py), in this process (the first case over its own process
too) and over `@modelcontextprotocol/server-everything` (npm, a real process).
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, OVER, World, fixtures_gateway, ref_line_of, running
from mcp import Client

from _waits import scaled
from byref.dispatch.outbound.reflines import EXAMPLE_SEQ, ref_line
from byref.gateway import Gateway
from byref.gateway.edge.server import GatewayServer
from byref.refs import handle, parse_model_envelope

sys.path.insert(0, str(FIXTURES))
from blocks_server import DOC

pytestmark = pytest.mark.anyio
EVERYTHING = Path(__file__).resolve().parents[3] / "node_modules" / ".bin" / "mcp-server-everything"


def _blocks(request: pytest.FixtureRequest | None = None
            ) -> AbstractAsyncContextManager[tuple[Gateway, GatewayServer]]:
    return fixtures_gateway(request, {"blocks": "blocks_server.py"})


async def _call(client: Client, name: str, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert not result.is_error, result.content
    return result


def _types(result: types.CallToolResult) -> list[str]:
    return [b.type for b in result.content]


def _texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


@pytest.mark.parametrize("over", OVER)
async def test_a_196_byte_json_result_is_forwarded_by_its_ref_byte_identical(
        over: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert len(DOC.encode()) == 196
    out = tmp_path / "copy.json"
    with anyio.fail_after(scaled(60)):
        async with _blocks(request) as (_gateway, server), Client(server) as client:
            shown = await _call(client, "blocks__doc")
            assert _types(shown) == ["text", "text"]
            assert _texts(shown)[0] == DOC  # the server's own characters, its own block
            ref = ref_line_of(shown)
            assert ref is not None
            line = _texts(shown)[1]
            assert len(line) <= 16  # "[ref r" + at most nine digits + "]"
            saved = await _call(client, "blocks__save", path=str(out), text=ref)
            assert _texts(saved)[0] == "wrote 196 bytes"
    assert out.read_bytes() == DOC.encode()  # 1.50, 1e2 and \u00e9 as the server wrote them


async def test_the_instructions_example_is_a_ref_line_as_results_show_it(
        tmp_path: Path) -> None:
    out = tmp_path / "copy.json"
    with anyio.fail_after(scaled(60)):
        async with _blocks() as (_gateway, server), Client(server) as client:
            instructions = client.instructions or ""
            line = re.search(r"\[ref (r\d+)\]", instructions)
            written = re.search(r'\{"\$ref":"(r\d+)"\}', instructions)
            assert line is not None and written is not None, instructions
            assert line.group(0) == ref_line(EXAMPLE_SEQ, 0)
            # The envelope the instructions tell the model to write holds the line's handle.
            example = json.loads(written.group(0))
            assert written.group(1) == line.group(1) == handle(EXAMPLE_SEQ)
            parse_model_envelope(example)  # a ref the model may write, as written
            shown = await _call(client, "blocks__doc")
            real = ref_line_of(shown)
            assert real is not None and re.fullmatch(r"r\d{1,9}", real["$ref"])
            # The example is the very line a result shows; with the handle a real result shows,
            # written as the instructions say, it resolves and delivers the result exactly.
            assert _texts(shown)[-1] == line.group(0).replace(line.group(1), real["$ref"])
            example["$ref"] = real["$ref"]
            await _call(client, "blocks__save", path=str(out), text=example)
    assert out.read_bytes() == DOC.encode()


async def test_several_blocks_keep_their_type_and_place() -> None:
    with anyio.fail_after(scaled(60)):
        async with _blocks() as (_gateway, server), Client(server) as client:
            result = await _call(client, "blocks__mixed")
    # caption, the image's marker (its ref) and the image itself, caption, the ref line
    assert _types(result) == ["text", "text", "image", "text", "text"]
    texts = _texts(result)
    assert texts[0] == "Here's the image you requested:"
    assert json.loads(texts[1])["opaque"] is True
    assert texts[2] == "The image above is a tiny PNG."
    assert ref_line_of(result) is not None
    assert not any(t.startswith('["') for t in texts)  # never one JSON array of blocks


async def test_a_large_block_is_placed_in_its_place_and_forwards_exactly(
        tmp_path: Path) -> None:
    big = "log line of the long block\n" * 2308
    by_value, by_field = tmp_path / "value.log", tmp_path / "field.log"
    with anyio.fail_after(scaled(60)):
        async with _blocks() as (_gateway, server), Client(server) as client:
            result = await _call(client, "blocks__mixed", big=True)
            assert _types(result) == ["text", "text", "image", "text", "text", "text"]
            texts = _texts(result)
            assert texts[0] == "Here's the image you requested:"
            assert texts[2] == "The image above is a tiny PNG."
            placed = json.loads(texts[3])  # the long block: its substitute, in its place
            assert placed["placed"] is True and placed["bytes"] == len(big.encode())
            assert "block 3 of its result was stored" in placed["note"]
            ref = ref_line_of(result)
            assert ref is not None
            await _call(client, "blocks__save", path=str(by_value), text=placed["value"])
            field = {"$ref": f"{ref['$ref']}.3"}  # the handle and a field
            await _call(client, "blocks__save", path=str(by_field), text=field)
    assert by_value.read_text() == big
    assert by_field.read_text() == big


async def test_the_everything_servers_mixed_results_keep_their_shape(world: World) -> None:
    if not EVERYTHING.exists():
        pytest.skip("@modelcontextprotocol/server-everything comes from npm: run `make upstreams`")
    servers = {"everything": {"command": str(EVERYTHING), "args": ["stdio"], "timeout": scaled(30)}}
    with anyio.fail_after(scaled(90)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            image = await _call(client, "everything__get-tiny-image")
            links = await _call(client, "everything__get-resource-links", count=2)
    assert _types(image) == ["text", "text", "image", "text", "text"]
    texts = _texts(image)
    assert texts[0] == "Here's the image you requested:"
    assert texts[2] == "The image above is the MCP logo."
    assert ref_line_of(image) is not None
    assert _types(links) == ["text", "resource_link", "resource_link", "text"]
    assert ref_line_of(links) is not None
