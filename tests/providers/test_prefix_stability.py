"""Across a 20-turn session through the Anthropic adapter, the cached prefix never changes.

Anthropic reads a request's prefix in the order tools → system → messages, and a breakpoint
caches everything up to and including the block that carries it. `prefix_upto` rebuilds those
bytes from the body the SDK actually sent (the `cache_control` markers themselves excluded, as the
cache excludes them), so the test sees what the cache sees.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from byref.harness import Harness
from byref.harness.messages import Request, Response
from byref.harness.providers import NativeDeferral, model_from_id, native_search_tool
from byref.harness.providers.anthropic import AnthropicModel
from byref.tools import Tool, tool
from doubles.wire import A_MODEL, Wire, a_json, a_message, a_text, a_tool_use, a_turn, count, fetch

TURNS = 20


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted {len(text)} chars"


def catalog() -> list[Tool]:
    return [native_search_tool(lambda q: ["note"] if "note" in q else []), fetch, count, note]


def play(body: dict[str, Any]) -> Any:
    """Search once, then call tools for 18 turns, then answer: 20 requests in all."""
    turn = a_turn(body)
    if turn == 0:
        return a_json(a_message(a_tool_use("search_tools", {"query": "take a note"})))
    if turn < TURNS - 1:
        if turn % 2:
            return a_json(a_message(a_tool_use("note", {"text": f"turn {turn}"})))
        return a_json(a_message(a_text(f"Step {turn}."), a_tool_use("fetch", {"project": "A"})))
    return a_json(a_message(a_text("All done.")))


def blocks(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """(bytes, carries a breakpoint) for every block, in the order the cache reads them."""
    out = []
    sections = [("tools", t) for t in body.get("tools", [])]
    sections += [("system", s) for s in body.get("system", [])]
    sections += [(f"messages/{m['role']}", b) for m in body["messages"] for b in m["content"]]
    for where, block in sections:
        marked = "cache_control" in block
        plain = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((where.encode() + json.dumps(plain, sort_keys=True).encode(), marked))
    return out


def prefix_upto(body: dict[str, Any], breakpoint: int) -> bytes:
    """The bytes up to and including the `breakpoint`-th marked block (-1: the last one)."""
    seq = blocks(body)
    marks = [i for i, (_, marked) in enumerate(seq) if marked]
    assert marks, "no cache breakpoint in the request"
    return b"".join(data for data, _ in seq[: marks[breakpoint] + 1])


def everything(body: dict[str, Any]) -> bytes:
    return b"".join(data for data, _ in blocks(body))


def run_session(**options: Any) -> Wire:
    wire = Wire(play)
    m = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                      max_retries=0, deferral=NativeDeferral(), **options)
    run = Harness(m, catalog(), system="Follow the rules.").run_sync("Take notes.")
    assert run.text == "All done." and len(wire.raw) == TURNS
    return wire


def test_bytes_before_the_last_breakpoint_are_identical_on_all_20_turns() -> None:
    wire = run_session(cache_conversation=False)
    first = prefix_upto(wire.bodies[0], -1)
    assert all(prefix_upto(body, -1) == first for body in wire.bodies)
    # The search on turn 1 loaded a tool, and still nothing before the breakpoint moved.
    assert any(b'"tool_reference"' in everything(body) for body in wire.bodies[1:])
    # On the wire itself: the SDK writes model, system and tools after the messages, and that
    # tail is byte-identical on every turn.
    tails = {raw[raw.rindex(b'],"model":'):] for raw in wire.raw}
    assert len(tails) == 1


def test_the_rolling_breakpoint_makes_each_turn_a_cache_hit_for_the_next() -> None:
    wire = run_session()
    stable = {prefix_upto(body, 0) for body in wire.bodies}
    assert len(stable) == 1  # tools + system: identical on all 20 turns
    for earlier, later in zip(wire.bodies, wire.bodies[1:], strict=False):
        # What turn n cached (up to its newest message) is where turn n+1 starts.
        assert everything(later).startswith(prefix_upto(earlier, -1))
        assert prefix_upto(later, -1) != prefix_upto(earlier, -1)
    marks = [sum(marked for _, marked in blocks(body)) for body in wire.bodies]
    assert marks == [2] * TURNS  # well inside Anthropic's limit of four


class WorkingSetLine:
    """Stands in for request assembly: appends the one varying line, different every turn."""

    def __init__(self, inner: AnthropicModel) -> None:
        self.inner = inner
        self.turn = 0

    async def respond(self, request: Request, **_: Any) -> Response:
        self.turn += 1
        line = f"You currently have {self.turn} of 40 activated tools loaded."
        return await self.inner.respond(replace(request, system=f"{request.system}\n\n{line}"))


def test_the_varying_line_follows_the_breakpoint_and_never_moves_the_prefix() -> None:
    wire = Wire(play)
    inner = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                          max_retries=0, deferral=NativeDeferral())
    assert isinstance(inner, AnthropicModel)
    Harness(WorkingSetLine(inner), catalog(), system="Follow the rules.").run_sync("Take notes.")
    assert len({prefix_upto(body, 0) for body in wire.bodies}) == 1
    assert len({json.dumps(body["system"][1]) for body in wire.bodies}) == TURNS
    assert all(body["system"][1] == {"type": "text", "text": body["system"][1]["text"]}
               for body in wire.bodies)


def test_without_the_split_a_varying_system_text_would_move_the_prefix() -> None:
    # The control: the same session with a varying line the splitter does not recognise.
    wire = Wire(play)
    inner = model_from_id(f"anthropic:{A_MODEL}", api_key="test", http_client=wire.client(),
                          max_retries=0, deferral=NativeDeferral())
    assert isinstance(inner, AnthropicModel)

    class Drifting(WorkingSetLine):
        async def respond(self, request: Request, **_: Any) -> Response:
            self.turn += 1
            drifting = f"Turn {self.turn}. {request.system}"
            return await self.inner.respond(replace(request, system=drifting))

    Harness(Drifting(inner), catalog(), system="Follow the rules.").run_sync("Take notes.")
    assert len({prefix_upto(body, 0) for body in wire.bodies}) == TURNS
