"""`byref bench gateway`'s first turn over the real catalog's servers (`shared/eval/mcp-catalog`).

Owns `catalog_first_turn`: every server's own tools/list answer (as a client hands it to the
model: name, description, input schema) against what the gateway declares over all of them on
its first turn, in search mode and in direct mode, plus its instructions, in characters and
tokens. The law: the gateway side is the gateway's own toolbox build and declaration path, fed
the servers' recorded listings (the catalog cannot be run: its servers need accounts), and the
data is read from `shared/eval` at bench time, never copied into the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types

from byref.discovery.declaring.declare import declare
from byref.events import Emitter
from byref.gateway.catalog.build import build_toolbox
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.convert import mcp_tool
from byref.gateway.config.file import parse_config
from byref.gateway.edge.server import INSTRUCTIONS
from byref.harness.tokens import count_tokens
from byref.reads import ReadLimits
from byref.transcript import Transcript


def _declared(tool: types.Tool) -> dict[str, Any]:
    # What a client hands the model for each tool: name, description, input schema.
    return {"name": tool.name, "description": tool.description or "",
            "input_schema": tool.input_schema}


def read_catalog(folder: Path) -> dict[str, list[types.Tool]]:
    """Server → its recorded tools/list answer, for every file of the catalog folder."""
    out: dict[str, list[types.Tool]] = {}
    for file in sorted(folder.glob("*.json")):
        raw = json.loads(file.read_text("utf-8"))
        out[file.stem] = [types.Tool.model_validate(t) for t in raw["tools"]]
    return out


def _unreachable(*_: Any, **__: Any) -> Any:
    raise RuntimeError("the first-turn bench declares tools and never calls them")


def gateway_first_turn(listings: dict[str, list[types.Tool]], mode: str) -> list[types.Tool]:
    """What a gateway over `listings` in `mode` declares before the model has done anything."""
    config = parse_config({"mcpServers": {name: {"command": "unused"} for name in listings},
                           "byref": {"mode": mode}})
    box = build_toolbox(config, 1, listings, {}, [], invoke=_unreachable, passed=Passed(),
                        usage=None, emit=Emitter(), errlog=None,
                        read_limits=ReadLimits(), call_tool=_unreachable)
    declared = declare(box.catalog, (*box.scaffolding, *box.pinned), Transcript(),
                       budget=config.working_set).declarations
    return [mcp_tool(d) for d in declared]


def catalog_first_turn(folder: Path) -> dict[str, Any]:
    """The servers' own declarations against the gateway's first turn in both modes."""
    listings = read_catalog(folder)
    own = "".join(json.dumps([_declared(t) for t in tools]) for tools in listings.values())
    own_tokens = count_tokens(own)
    out: dict[str, Any] = {"servers": len(listings),
                           "tools": sum(len(t) for t in listings.values()),
                           "direct_chars": len(own), "direct_tokens": own_tokens}
    for mode in ("search", "direct"):
        tools = gateway_first_turn(listings, mode)
        text = json.dumps([_declared(t) for t in tools]) + INSTRUCTIONS
        tokens = count_tokens(text)
        out[mode] = {"tools": len(tools), "chars": len(text), "tokens": tokens,
                     "ratio_tokens": round(tokens / max(own_tokens, 1), 3)}
    return out
