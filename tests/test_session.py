"""`Session`: byref inside a loop you write — declarations in the provider's shape, that
provider's tool calls in, its tool results out, refs resolved between them."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import pytest

import byref
from byref.dispatch.outbound.reflines import ref_line
from byref.testing import result_text

ROWS = [{"id": i, "pad": "x" * 60} for i in range(600)]


def _tools(seen: list[Any]) -> list[byref.Tool]:
    @byref.tool
    def export() -> list[dict[str, Any]]:
        """Every row (large: stored, shown as a preview and a ref)."""
        return ROWS

    @byref.tool
    def count(rows: list[dict[str, Any]]) -> int:
        """Count rows."""
        seen.append(rows)
        return len(rows)

    return [export, count]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-chat", "mcp"])
def test_declarations_come_in_the_providers_shape_and_stay_byte_stable(provider: Any) -> None:
    session = byref.Session(_tools([]))
    first, second = session.declarations(provider), session.declarations(provider)
    assert msgspec.json.encode(first) == msgspec.json.encode(second)
    names = [d.get("name") or d.get("function", {}).get("name") for d in first]
    assert names == sorted(names) == ["count", "export"]
    session.handle_sync([{"type": "tool_use", "id": "t1", "name": "export", "input": {}}])
    third, fourth = session.declarations(provider), session.declarations(provider)
    assert msgspec.json.encode(third) == msgspec.json.encode(fourth)
    names = [d.get("name") or d.get("function", {}).get("name") for d in third]
    assert names == sorted(names) and {"export", "count", "read_json", "read_result"} <= set(names)


def _names(session: byref.Session) -> list[str]:
    return [d["name"] for d in session.declarations("anthropic")]


@byref.tool
def weather(city: str) -> dict[str, object]:
    """Today's weather for a city."""
    return {"city": city, "temp_c": 21}


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-chat", "mcp"])
def test_nothing_stored_declares_no_reader(provider: Any) -> None:
    """The README's weather loop: the readers cost nothing while no result is stored (they
    were ~4.8 KB of every request), and stay callable."""
    session = byref.Session([weather])
    first = session.declarations(provider)
    assert "read_" not in json.dumps(first) and "present" not in json.dumps(first)
    [answer] = session.handle_sync([{"type": "tool_use", "id": "t", "name": "weather",
                                     "input": {"city": "Paris"}}])
    assert result_text(answer["content"]) == '{"city":"Paris","temp_c":21}'
    assert session.declarations(provider) == first  # an inline result needs no reader
    # Undeclared is not uncallable: a model that writes read_result anyway is answered by it.
    [read] = session.handle_sync([{"type": "tool_use", "id": "r", "name": "read_result",
                                   "input": {"ref": {"$ref": {"type": "Message", "seq": 1,
                                                              "part": 0}}}}])
    assert "no tool" not in read["content"].lower() and "Paris" in read["content"]


def test_a_placed_result_declares_the_readers_its_note_names() -> None:
    session = byref.Session([weather, *_tools([])])
    assert _names(session) == ["count", "export", "weather"]
    [placed] = session.handle_sync([{"type": "tool_use", "id": "t", "name": "export",
                                     "input": {}}])
    note = json.loads(placed["content"])["note"]
    due = ["count", "export", "present", "query_json", "read_json", "read_result", "weather"]
    assert _names(session) == due
    assert all(name in note for name in ("read_result", "read_json", "query_json"))
    session.handle_sync([{"type": "tool_use", "id": "w", "name": "weather",
                          "input": {"city": "Oslo"}}])
    assert _names(session) == due  # once due, a reader stays declared (the prefix stays put)


def test_a_stored_image_declares_read_result_and_present_not_the_json_readers() -> None:
    @byref.tool
    def snapshot() -> byref.Payload:
        """Take a picture."""
        return byref.Payload.from_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64), "image/png")

    session = byref.Session([snapshot])
    assert _names(session) == ["snapshot"]
    [marker] = session.handle_sync([{"type": "tool_use", "id": "s", "name": "snapshot",
                                     "input": {}}])
    assert json.loads(marker["content"])["opaque"] is True
    assert _names(session) == ["present", "read_result", "snapshot"]


def test_an_error_result_declares_no_reader() -> None:
    session = byref.Session(_tools([]))
    session.handle_sync([{"type": "tool_use", "id": "c", "name": "count", "input": {}}])
    assert _names(session) == ["count", "export"]


def test_an_anthropic_loop_passes_a_ref_between_tools_exactly() -> None:
    seen: list[Any] = []
    session = byref.Session(_tools(seen))
    [exported] = session.handle_sync([{"type": "tool_use", "id": "t1", "name": "export",
                                       "input": {}}])
    assert exported["tool_use_id"] == "t1" and len(exported["content"]) < 4_000
    value = json.loads(exported["content"])["value"]  # the ref the model would copy
    [counted] = session.handle_sync([{"type": "tool_use", "id": "t2", "name": "count",
                                      "input": {"rows": value}}])
    assert counted == {"type": "tool_result", "tool_use_id": "t2",
                       "content": f"600\n{ref_line(3, 0)}"}
    assert seen == [ROWS]


def test_sdk_objects_are_accepted_as_returned() -> None:
    from anthropic.types import ToolUseBlock

    session = byref.Session(_tools([]))
    block = ToolUseBlock(id="t1", name="count", input={"rows": [{"a": 1}]}, type="tool_use")
    assert session.handle_sync([block])[0]["content"] == f"1\n{ref_line(1, 0)}"


def test_openai_chat_calls_with_text_arguments_and_a_malformed_one() -> None:
    session = byref.Session(_tools([]))
    out = session.handle_sync([
        {"id": "c1", "type": "function", "function": {"name": "count",
                                                      "arguments": '{"rows": [{}, {}]}'}},
        {"id": "c2", "type": "function", "function": {"name": "count", "arguments": "{rows"}},
    ], "openai-chat")
    assert out[0] == {"role": "tool", "tool_call_id": "c1", "content": f"2\n{ref_line(1, 0)}"}
    assert out[1]["tool_call_id"] == "c2" and "not one" in out[1]["content"]


def test_twenty_async_calls_in_one_turn_overlap_and_return_in_call_order() -> None:
    started: list[int] = []
    everyone = asyncio.Event()

    @byref.tool
    async def slow(i: int) -> int:
        """Wait until every call of the turn has started, then answer."""
        started.append(i)
        if len(started) == 20:
            everyone.set()
        await asyncio.wait_for(everyone.wait(), timeout=10)  # sequential runs would time out
        return i * i

    session = byref.Session([slow])
    calls = [{"type": "function_call", "call_id": f"c{i}", "name": "slow",
              "arguments": json.dumps({"i": i})} for i in range(20)]
    out = asyncio.run(session.handle(calls, "openai"))
    assert [r["call_id"] for r in out] == [f"c{i}" for i in range(20)]
    assert [r["output"] for r in out] == [f"{i * i}\n{ref_line(1, i)}" for i in range(20)]
    assert len(started) == 20


def test_an_unknown_provider_shape_is_a_developer_error() -> None:
    with pytest.raises(byref.DeveloperError, match="Unknown provider shape 'gemini'"):
        byref.Session().declarations("gemini")  # type: ignore[arg-type]


def test_handle_sync_inside_a_running_loop_says_to_await() -> None:
    session = byref.Session(_tools([]))

    async def main() -> None:
        session.handle_sync([{"type": "tool_use", "id": "t", "name": "count",
                              "input": {"rows": []}}])

    with pytest.raises(byref.InvalidValue) as caught:
        asyncio.run(main())
    assert str(caught.value) == ("session.handle_sync(...) cannot run inside a running event "
                                 "loop; use await session.handle(...).")
    assert len(session.transcript) == 0  # nothing was recorded


def test_with_discovery_the_declarations_follow_the_working_set() -> None:
    from byref.discovery import Catalog, Discovery

    @byref.tool
    def archive_invoice(number: str) -> str:
        """Archive a paid invoice by its number."""
        return f"archived {number}"

    session = byref.Session(_tools([]), discovery=Discovery(Catalog([archive_invoice])))
    before = {d["name"] for d in session.declarations("anthropic")}
    assert {"search_tools", "activate_tool", "count"} <= before
    assert "archive_invoice" not in before and "read_json" not in before
    [activated] = session.handle_sync([{"type": "tool_use", "id": "a", "name": "activate_tool",
                                        "input": {"names": ["archive_invoice"]}}])
    assert "archive_invoice" in activated["content"]
    after = {d["name"] for d in session.declarations("anthropic")}
    assert after == before | {"archive_invoice"}
    assert session.surface().system_lines[-1].startswith("You currently have 1 of")
    [done] = session.handle_sync([{"type": "tool_use", "id": "b", "name": "archive_invoice",
                                   "input": {"number": "INV-7"}}])
    assert result_text(done["content"]) == "archived INV-7"
    session.handle_sync([{"type": "tool_use", "id": "e", "name": "export", "input": {}}])
    stored = {d["name"] for d in session.declarations("anthropic")}
    assert stored == after | {"read_result", "read_json", "query_json", "present"}
