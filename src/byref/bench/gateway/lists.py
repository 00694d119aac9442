"""What one search → activate → call round trip shows the model, in each protocol generation.

Owns the `round_trip` section of `byref bench gateway`: `byref gateway` (a process over stdio, on
the bench upstream) driven by the official client in the handshake era, whose tool list grows
when a tool is activated, and in 2026-07-28, whose list never changes (activate_tool answers
with the declaration; the call goes through call_tool). Each generation gets a gateway of its
own (over stdio a process is one conversation). A model request is counted as a client hands it
over: the tool declarations it lists (name, description, input schema, as JSON) plus every call
and result so far (each call as JSON of its name and arguments, each result as its text blocks).
The law: every figure is measured on the same round trip in the same run; the handshake era is
the baseline the ratios divide by.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from byref.bench.gateway.rig import gateway_stdio
from byref.gateway.catalog.toolbox import CALL_TOOL

QUERY = "return the text unchanged"
ARGS = {"text": "ping"}


def _declared(tools: list[Any]) -> str:
    # What a client hands the model for its tool list: name, description, input schema.
    return json.dumps([{"name": t.name, "description": t.description or "",
                        "input_schema": t.input_schema} for t in tools])


def _said(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def one_round(config: Any, mode: str, tool: str) -> dict[str, Any]:
    """The round trip through a fresh `byref gateway` on `config` with a client in `mode`
    ('legacy' or 'auto': 2026-07-28): each request's characters and the generation's totals."""
    history: list[str] = []
    requests: list[dict[str, int]] = []
    async with Client(gateway_stdio(config), mode=mode, cache=None) as client:
        version = client.protocol_version
        # Settled: a first list does not wait for the upstream (a call does).
        await client.call_tool("search_tools", {"query": QUERY})

        async def turn(name: str, arguments: dict[str, Any]) -> Any:
            tools = _declared((await client.list_tools()).tools)
            requests.append({"declarations": len(tools),
                             "history": sum(len(h) for h in history)})
            history.append(json.dumps({"name": name, "arguments": arguments}))
            result = await client.call_tool(name, arguments)
            history.append(_said(result))
            return result

        await turn("search_tools", {"query": QUERY})
        await turn("activate_tool", {"names": [tool]})
        stable = version == "2026-07-28"
        call = (CALL_TOOL, {"name": tool, "arguments": ARGS}) if stable else (tool, ARGS)
        answered = await turn(*call)
        if answered.is_error:
            raise RuntimeError(f"the round trip's call failed: {_said(answered)[:300]}")
        last = _declared((await client.list_tools()).tools)
        requests.append({"declarations": len(last), "history": sum(len(h) for h in history)})
    totals = [r["declarations"] + r["history"] for r in requests]
    return {"protocol_version": version, "requests": requests,
            "first_request_chars": totals[0], "last_request_chars": totals[-1],
            "round_trip_chars": sum(totals),
            "declarations_growth_chars": requests[-1]["declarations"]
            - requests[0]["declarations"]}


async def round_trip_figures(config: Any, tool: str) -> dict[str, Any]:
    """Both generations on the same round trip (`tool` found, activated and called), with the
    2026-07-28 figures as ratios to the handshake era's."""
    with anyio.fail_after(180):
        legacy = await one_round(config, "legacy", tool)
        modern = await one_round(config, "auto", tool)
    return {"tool": tool, "query": QUERY, "handshake": legacy, "2026-07-28": modern,
            "ratio_round_trip": round(modern["round_trip_chars"]
                                      / max(legacy["round_trip_chars"], 1), 3),
            "ratio_last_request": round(modern["last_request_chars"]
                                        / max(legacy["last_request_chars"], 1), 3)}
