"""Code mode at the gateway while a program runs: the conversation's other calls go on (no lock
held for the run, and what the lock keeps still holds), a call given up on is cancelled at its
upstream, and the calls code made are in the metrics beside the client's.

Real servers: tests/gateway/fixtures/code_server.py over stdio, the gateway driven by the
official `mcp` client in process.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from _code_rig import _sandbox, code_server  # noqa: F401 (an autouse fixture)
from _gateway_rig import World, ref_line_of, running, text_blocks
from mcp import Client

from _waits import scaled
from byref.dispatch.outbound.reflines import named
from byref.gateway.catalog import code as gateway_code
from byref.gateway.core import Gateway
from byref.refs import handle_envelope
from byref.tools.code_mode.run_code import CodeMode

pytestmark = pytest.mark.anyio


def _samples(gateway: Gateway) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    assert gateway.metrics is not None
    exposition = gateway.metrics.exposition()[0].decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(exposition) for s in family.samples}


def _calls(server: str, tool: str, outcome: str, via: str) -> tuple[str, tuple[Any, ...]]:
    return ("byref_gateway_calls_total", (("outcome", outcome), ("server", server),
                                          ("tool", tool), ("via", via)))


async def _call(client: Client, name: str, **arguments: Any) -> str:
    done = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
    assert not done.is_error, text_blocks(done)
    return text_blocks(done)[0]


async def test_the_conversation_goes_on_while_its_program_runs(world: World,
                                                               tmp_path: Path) -> None:
    # The program waits inside hold("b") until this test, calling through the same
    # conversation, releases it: were the run holding the conversation's lock, neither release
    # could run before the program ended (each hold would wait out its 20 s instead).
    code = """
print(tools.code__hold(key="a", seconds=20))
print(tools.code__hold(key="b", seconds=20))
try:
    tools.call("no_such_tool", {})
except tools.ToolError as exc:
    print(exc.reason)
"""
    ran: dict[str, types.CallToolResult] = {}
    with anyio.fail_after(scaled(120)):
        async with running(world, code_server(tmp_path), codeMode="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()

            async def run() -> None:
                ran["run"] = await client.call_tool("run_code", {"code": code})

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                assert await _call(client, "code__release", key="a") == "released"
                # The program is inside hold("b") now, and stays there until released: a local
                # call (recorded under the lock) and a proxied one run meanwhile.
                searched = await client.call_tool("search_tools", {"query": "stock by sku"})
                assert not searched.is_error, text_blocks(searched)
                assert '"stock"' in await _call(client, "code__lookup", sku="A-1")
                assert "run" not in ran
                assert await _call(client, "code__release", key="b") == "released"
            result = ran["run"]
            texts = text_blocks(result)
            assert not result.is_error, texts
            summary, printed = texts[0].split("\n", 1)
            assert printed.splitlines() == ["released", "released", "unknown-tool"], printed
            assert summary.startswith("[run_code] 2 tool calls (code__hold ×2); refused: "
                                      "no_such_tool (unknown-tool) ×1"), summary

            # What the lock keeps holds: every result names the message it landed at (run_code's
            # own line was moved there, past the calls that landed meanwhile), and a local
            # call's result follows its call with nothing between.
            state = gateway.scopes.all()[0]
            messages = list(state.transcript)
            for message in messages:
                for index, part in enumerate(message.parts):
                    if part.type == "tool_result":
                        assert named(part.rendered, message.seq) in (
                            None, (message.seq, index)), message
            seq_of = {(p.type, p.call_id): m.seq for m in messages for p in m.parts}
            made = {p.tool: p.call_id for m in messages for p in m.parts if p.type == "tool_call"}
            search_id, run_id = made["search_tools"], made["run_code"]
            assert seq_of["tool_result", search_id] == seq_of["tool_call", search_id] + 1
            run_call, run_result = seq_of["tool_call", run_id], seq_of["tool_result", run_id]
            landed_between = [m.seq for m in messages if run_call < m.seq < run_result]
            assert len(landed_between) >= 6, messages  # two releases, the search, the lookup
            line = ref_line_of(result)
            assert line == handle_envelope(run_result)

            # The calls code made are counted beside the client's, told apart by `via`; a name
            # no tool has is counted as `unknown`, never as the name the program wrote.
            got = _samples(gateway)
            assert got[_calls("code", "code__hold", "ok", "code")] == 2
            assert got[_calls("byref", "unknown", "error", "code")] == 1
            assert got[_calls("code", "code__release", "ok", "client")] == 2
            assert got[_calls("byref", "run_code", "ok", "client")] == 1
            assert _calls("code", "code__hold", "ok", "client") not in got
            assert got[("byref_gateway_call_seconds_count", (
                ("server", "code"), ("tool", "code__hold"), ("via", "code")))] == 2


async def test_a_call_from_code_past_its_timeout_is_cancelled_at_its_upstream(
        world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_code, "CodeMode", functools.partial(CodeMode, call_timeout=1.0))
    code = """
try:
    tools.code__hold(key="c", seconds=30)
except tools.ToolError as exc:
    print(exc.reason, exc.text)
"""
    with anyio.fail_after(scaled(120)):
        async with running(world, code_server(tmp_path), codeMode="readOnly") as (
                gateway, server), Client(server) as client:
            await gateway.toolbox()
            result = await client.call_tool("run_code", {"code": code})
            texts = text_blocks(result)
            assert not result.is_error, texts
            summary, printed = texts[0].split("\n", 1)
            assert printed == ("call-timeout Tool 'code__hold' did not finish within 1s, the "
                               "limit for one call from code; it was cancelled.\n")
            # The upstream was told (notifications/cancelled), as when a client cancels.
            assert await _call(client, "code__was_cancelled", key="c") == "cancelled"
            assert "refused: code__hold (call-timeout) ×1" in summary
            record = summary.split("record ", 1)[1].rstrip(".")
            state = gateway.scopes.all()[0]
            kept = gateway.store.get(state.store_scope, record)
            assert kept is not None
            lines = [json.loads(line) for line in kept.data.decode().splitlines()]
            assert [p["value"] for m in lines if m["role"] == "tool" for p in m["parts"]] == [
                printed.removeprefix("call-timeout ").strip()]
            assert _samples(gateway)[_calls("code", "code__hold", "cancelled", "code")] == 1
