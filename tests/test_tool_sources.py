"""The tool-source port: one battery every source runs (in-memory, catalog, a real MCP server
over stdio, and the wrappers), then what a harness and a session do with sources."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import byref
from _waits import scaled
from byref.discovery import Catalog
from byref.dispatch.outbound.reflines import ref_line, split
from byref.harness import Harness, ScriptedModel, Session, call, say
from byref.testing import result_text
from byref.tools import Tool
from byref.tools.sources import (
    CatalogSource,
    Filtered,
    McpSource,
    Prefixed,
    ToolSet,
    ToolSource,
    collect,
)

pytestmark = pytest.mark.anyio



@byref.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@byref.tool
async def shout(text: str) -> str:
    """Upper-case some text (async)."""
    return text.upper()


async def battery(source: ToolSource, name: str, arguments: dict[str, Any],
                  check: Any) -> None:
    """What every source must do: list real tools (declarable, unique names, stable identity
    between listings) and run a listed one by name, refusing a name it does not list."""
    tools = source.tools()
    assert tools and all(isinstance(t, Tool) for t in tools)
    names = [t.name for t in tools]
    assert len(set(names)) == len(names) and name in names
    assert [t.name for t in source.tools()] == names
    for t in tools:
        declared = t.declaration()
        assert declared["name"] == t.name and declared["input_schema"]["type"] == "object"
    check(await source.call(name, arguments))
    with pytest.raises(byref.errors.InvalidValue):
        await source.call("no_such_tool", {})


async def test_the_in_memory_source() -> None:
    await battery(ToolSet([add, shout]), "add", {"a": 2, "b": 3}, lambda v: v == 5 or _fail(v))
    await battery(ToolSet([add, shout]), "shout", {"text": "hi"}, lambda v: _eq(v, "HI"))


async def test_a_catalog_is_a_source_and_lists_what_it_gains() -> None:
    catalog = Catalog([add])
    source = CatalogSource(catalog)
    await battery(source, "add", {"a": 1, "b": 1}, lambda v: _eq(v, 2))
    catalog.add(shout)
    assert {t.name for t in source.tools()} == {"add", "shout"}


async def test_the_wrappers_filter_and_prefix_without_changing_delivery() -> None:
    both = ToolSet([add, shout])
    only = Filtered(both, {"shout"})
    assert [t.name for t in only.tools()] == ["shout"]
    await battery(only, "shout", {"text": "a"}, lambda v: _eq(v, "A"))
    with pytest.raises(byref.errors.InvalidValue, match="'add' is filtered out"):
        await only.call("add", {"a": 1, "b": 2})
    prefixed = Prefixed(both, "math_")
    await battery(prefixed, "math_add", {"a": 4, "b": 5}, lambda v: _eq(v, 9))
    assert prefixed.tools()[0] is prefixed.tools()[0]  # one renamed tool: stable schemas
    assert prefixed.tools()[0].declaration() == prefixed.tools()[0].declaration()
    assert [t.name for t in both.tools()] == ["add", "shout"]  # the originals keep their names
    odd = Filtered(both, lambda t: t.name.startswith("a"))
    assert [t.name for t in odd.tools()] == ["add"]


@pytest.fixture
async def time_server() -> AsyncIterator[Any]:
    """The real `mcp-server-time` from PyPI over stdio (the gateway-test extra)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("mcp-server-time is not installed (pip install -e '.[gateway-test]')")
    with anyio.fail_after(scaled(60)):
        async with Client(stdio_client(StdioServerParameters(
                command=command, args=["--local-timezone", "UTC"]))) as client:
            yield client


async def test_an_mcp_server_is_a_source(time_server: Any) -> None:
    source = await McpSource.connect(time_server)
    assert {"get_current_time", "convert_time"} <= {t.name for t in source.tools()}
    converted = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}

    def check(value: Any) -> None:
        assert value["target"]["timezone"] == "Asia/Tokyo", value
        assert value["target"]["datetime"].split("T")[1].startswith("21:00"), value

    with anyio.fail_after(scaled(30)):
        await battery(source, "convert_time", converted, check)
        # A server-side error is a refusal with the server's words, not a crash.
        with pytest.raises(byref.ToolRefusal, match="reported an error"):
            await source.call("get_current_time", {"timezone": "Not/AZone"})


async def test_a_harness_takes_sources_beside_tools_and_calls_through_them(
        time_server: Any) -> None:
    source = Prefixed(await McpSource.connect(time_server), "time_")
    script = ScriptedModel([
        call("time_convert_time", {"source_timezone": "UTC", "time": "08:30",
                                   "target_timezone": "Europe/Paris"}),
        call("add", {"a": 1, "b": 2}),
        say("done")])
    with anyio.fail_after(scaled(30)):
        run = await Harness(script, [add, source]).run("go")
    results = [m.parts[0] for m in run.transcript if m.role == "tool"]
    assert not results[0].is_error, results[0].rendered
    assert results[0].value["target"]["timezone"] == "Europe/Paris"
    assert results[1].value == 3
    declared = {d["name"] for d in run.requests[0].tools}
    assert {"add", "time_convert_time", "time_get_current_time"} <= declared


async def test_an_mcp_servers_image_is_stored_in_its_place() -> None:
    """A server's result of text, an image and text: the image is stored whole and shown in its
    place as a marker with its ref (it was dropped: the value held the two texts alone)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    fixtures = Path(__file__).parent / "gateway" / "fixtures"
    sys.path.insert(0, str(fixtures))
    from blocks_server import PNG

    script = ScriptedModel([call("mixed", {}), say("done")])
    with anyio.fail_after(scaled(60)):
        async with Client(stdio_client(StdioServerParameters(
                command=sys.executable, args=[str(fixtures / "blocks_server.py")]))) as client:
            harness = Harness(script, [await McpSource.connect(client)])
            run = await harness.run("go")
    [result] = [m.parts[0] for m in run.transcript if m.role == "tool"]
    assert not result.is_error, result.rendered
    first, image, last = result.value
    assert (first, last) == ("Here's the image you requested:", "The image above is a tiny PNG.")
    assert (image["kind"], image["bytes"]) == ("image/png", len(PNG))
    stored = harness.store.get(harness.scope, image["value"]["$ref"]["key"])
    assert stored is not None and stored.data == PNG


async def test_an_mcp_servers_error_carries_a_ref_to_its_own_words() -> None:
    """An error result is a result: its part records the server's words and ends with the ref
    line naming them, which forwards them byte for byte."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    fixtures = Path(__file__).parent / "gateway" / "fixtures"
    sys.path.insert(0, str(fixtures))
    from blocks_server import REFUSAL

    with anyio.fail_after(scaled(60)):
        async with Client(stdio_client(StdioServerParameters(
                command=sys.executable, args=[str(fixtures / "blocks_server.py")]))) as client:
            source = await McpSource.connect(client)
            refused = await Harness(ScriptedModel([call("refuse", {}), say("done")]),
                                    [source]).run("go")
            [part] = [m.parts[0] for m in refused.transcript if m.role == "tool"]
            assert part.is_error and part.value == REFUSAL
            shown, line = split(part.rendered or "")
            assert shown == f"Tool 'refuse' reported an error: {REFUSAL}"
            assert line is not None
            seq = next(m.seq for m in refused.transcript if m.role == "tool")
            assert line == ref_line(seq, 0)


def test_a_session_declares_a_sources_tools() -> None:
    session = Session([ToolSet([add]), shout])
    names = {d["name"] for d in session.declarations("anthropic")}
    assert {"add", "shout"} <= names
    [out] = session.handle_sync([{"type": "tool_use", "id": "t", "name": "shout",
                                  "input": {"text": "ok"}}])
    assert result_text(out["content"]) == "OK"


def test_anything_else_is_a_developer_error() -> None:
    with pytest.raises(byref.errors.InvalidValue) as caught:
        collect([add, print])  # type: ignore[list-item]
    assert str(caught.value) == ("Expected a Tool or a ToolSource, got "
                                 "'builtin_function_or_method'; wrap a plain function with "
                                 "@byref.tool.")
    with pytest.raises(byref.errors.InvalidValue, match=r"repeated: \['add'\]"):
        ToolSet([add, add])


def _eq(value: Any, expected: Any) -> None:
    assert value == expected


def _fail(value: Any) -> None:
    raise AssertionError(value)
