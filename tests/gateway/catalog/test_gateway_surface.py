"""The standing surface: what the gateway's first turn costs, and that each character earns it.

Counted as `byref bench gateway` counts it: the declarations a client hands the model (name,
description, input schema) plus the server's instructions, in o200k tokens, over the four
reference servers.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import anyio
import pytest
from _gateway_rig import World, running
from mcp import Client

from _waits import scaled
from byref.discovery import Catalog, Discovery
from byref.harness.tokens import count_tokens
from byref.tools import BUILTIN_JSON_TOOLS, Tool
from byref.tools.readers.present import make_present_tool
from byref.tools.readers.read_result import make_read_result

pytestmark = pytest.mark.anyio

TARGET_TOKENS = 1_500


async def _first_turn(world: World) -> tuple[list[dict[str, Any]], str]:
    servers = world.need("time", "git", "sqlite", "filesystem")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (gateway, server), Client(server) as client:
            await gateway.toolbox()  # the settled first turn: every server listed
            listed = await client.list_tools()
            instructions = client.instructions or ""
    declared = [{"name": t.name, "description": t.description or "",
                 "input_schema": t.input_schema} for t in listed.tools]
    return declared, instructions


async def test_the_first_turn_is_under_the_target(world: World) -> None:
    declared, instructions = await _first_turn(world)
    tokens = count_tokens(json.dumps(declared) + instructions)
    assert tokens <= TARGET_TOKENS, {d["name"]: count_tokens(json.dumps(d)) for d in declared}


async def test_the_first_turn_stays_at_its_trimmed_size(world: World) -> None:
    # 2,304 tokens before the scaffolding was trimmed; this pins the trim, whatever is declared.
    declared, instructions = await _first_turn(world)
    scaffolding = {"activate_tool", "call_tool", "present", "read_result", "search_tools"}
    assert scaffolding <= {d["name"] for d in declared}
    tokens = count_tokens(json.dumps(declared) + instructions)
    json_tools = sum(count_tokens(json.dumps(d)) for d in declared
                     if d["name"] in {"read_json", "query_json"})
    assert tokens - json_tools <= TARGET_TOKENS
    assert tokens <= 2_050


def _scaffolding() -> list[Tool]:
    search, activate = Discovery(Catalog()).tools
    return [search, activate, *BUILTIN_JSON_TOOLS, make_read_result(), make_present_tool()]


def _prose(schema: Any, at: str = "") -> list[str]:
    """Where a schema carries prose of its own (descriptions, titles)."""
    found: list[str] = []
    if isinstance(schema, dict):
        found += [f"{at}/{k}" for k in ("description", "title") if k in schema]
        for key, sub in schema.items():
            found += _prose(sub, f"{at}/{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            found += _prose(sub, f"{at}/{i}")
    return found


@pytest.mark.parametrize("tool", _scaffolding(), ids=lambda t: t.name)
def test_a_scaffolding_schema_carries_no_prose_of_its_own(tool: Tool) -> None:
    # Each parameter is explained once, in the description; the schema only types it.
    assert _prose(tool.declaration()["input_schema"]) == []
    for name in tool.input_schema["properties"]:
        assert f"`{name}`" in tool.description, (tool.name, name)


@pytest.mark.parametrize("tool", _scaffolding(), ids=lambda t: t.name)
def test_a_written_out_schema_matches_the_function_it_declares(tool: Tool) -> None:
    params = {n: p for n, p in inspect.signature(tool.fn).parameters.items()
              if n != "ctx" and p.kind is not p.VAR_KEYWORD}
    if not params:  # present takes **args: its schema is the whole contract
        return
    assert set(tool.input_schema["properties"]) == set(params)
    assert set(tool.input_schema.get("required", ())) == {
        n for n, p in params.items() if p.default is inspect.Parameter.empty}
