"""The plain `tools/call` fast path (`edge/lanes/fastpath.py`): its answer (`edge/answer.py`'s
`wire_answer`, which both lanes answer with) is the very JSON the SDK's own path makes of the
handler's result (`call_result`, which `client_result` answers with), over both protocol
generations; what is not plain (a malformed request, an answer with images, links or
structuredContent) goes the SDK's way."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import FIXTURES, World, running
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import methods

from _tiers import examples
from _waits import scaled
from byref.gateway.edge import answer
from byref.gateway.edge.answer import call_result, sieved, wire_answer
from byref.gateway.edge.lanes.fastpath import PlainCalls
from byref.gateway.edge.server import GatewayServer
from byref.transcript import Part

MODES = ("legacy", "2026-07-28")
VERSIONS = [v for (m, v) in methods.CLIENT_REQUESTS if m == "tools/call"]
_SERVER: Server[Any] = Server("t")


@settings(max_examples=examples(150), deadline=None)
@given(value=st.one_of(st.text(), st.integers(), st.dictionaries(st.text(), st.integers())),
       rendered=st.one_of(st.none(), st.text()), is_error=st.booleans(),
       version=st.sampled_from(VERSIONS))
def test_the_plain_answer_is_the_sdks_sieve_of_the_handlers_result(
        value: Any, rendered: str | None, is_error: bool, version: str) -> None:
    part = Part(type="tool_result", value=value, rendered=rendered, is_error=is_error)
    assert wire_answer(part, None, version, _SERVER) == sieved(call_result(part), version, _SERVER)


def _media() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / "media_server.py")],
            "timeout": scaled(30)}


@asynccontextmanager
async def _both(world: World, mode: str) -> AsyncIterator[tuple[Client, Client]]:
    """Two clients on two gateways over the media server: one with the fast path, one without."""
    async with running(world, {"media": _media()}) as (_g1, fast), \
            running(world, {"media": _media()}) as (_g2, sdk):
        _without_fast_path(sdk)
        async with Client(fast, mode=mode) as a, Client(sdk, mode=mode) as b:
            yield a, b


def _without_fast_path(server: GatewayServer) -> None:
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, PlainCalls)]


CASES: list[tuple[str, dict[str, Any]]] = [
    ("call_tool", {"name": "media__peek", "arguments": {}}),  # text and structuredContent
    ("call_tool", {"name": "media__long_note"}),  # stored: its marker, text alone
    ("call_tool", {"name": "media__screenshot", "arguments": {"size": 300}}),  # an image beside
    ("call_tool", {"name": "media__weather", "arguments": {"city": "Oslo"}}),  # structured
    ("call_tool", {"name": "media__link"}),  # a resource_link beside
    ("call_tool", {"name": "media__nope"}),  # refused: an error answer
    ("call_tool", {"name": "media__weather", "arguments": {"city": 3}}),  # refused input
    ("search_tools", {"query": "weather"}),  # byref's own tool
    ("peek", {}),  # a server's own name for its tool
]


def _shape(result: types.CallToolResult) -> dict[str, Any]:
    out = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    for block in out["content"]:  # call ids and refs differ between two gateways
        if block.get("type") == "text":
            block["text"] = len(block["text"])
    info = out.get("_meta", {}).get(types.SERVER_INFO_META_KEY, {})
    if "description" in info:  # names each gateway's own stdio conversation
        info["description"] = re.sub(r"stdio-[0-9a-f]+", "stdio-…", info["description"])
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_answers_match_the_sdks_path_and_plain_ones_skip_it(
        world: World, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plain: list[Part] = []
    real = answer.call_result_wire

    def counted(part: Part) -> dict[str, Any]:
        plain.append(part)
        return real(part)

    monkeypatch.setattr(answer, "call_result_wire", counted)
    with anyio.fail_after(scaled(120)):
        async with _both(world, mode) as (fast, sdk):
            for name, arguments in CASES:
                a, b = await fast.call_tool(name, arguments), await sdk.call_tool(name, arguments)
                assert _shape(a) == _shape(b), (name, arguments)
    # Answers that are their text alone took the fast path: the stored note's marker, the two
    # refusals and search; peek (the SDK's MCPServer adds structuredContent to a str), the image,
    # the weather and the link carry more and went through the SDK's sieve.
    assert sorted((p.tool, p.is_error) for p in plain) == [
        ("call_tool", True), ("media__long_note", False), ("media__weather", True),
        ("search_tools", False)]


async def malformed_call_errors(*clients: Client) -> list[tuple[int, str]]:
    """(code, message) each client is answered for a tools/call whose `arguments` is a list (the
    SDK's params validation refuses it)."""
    errors = []
    for client in clients:
        with pytest.raises(MCPError) as raised:
            await client.session.send_request(
                types.CallToolRequest(params=types.CallToolRequestParams.model_construct(
                    name="call_tool", arguments=["not", "an", "object"])),
                types.CallToolResult)
        errors.append((raised.value.error.code, raised.value.error.message))
    return errors


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
async def test_a_malformed_call_is_the_sdks_error(world: World, mode: str) -> None:
    with anyio.fail_after(scaled(120)):
        async with _both(world, mode) as (fast, sdk):
            errors = await malformed_call_errors(fast, sdk)
            assert errors[0] == errors[1]
