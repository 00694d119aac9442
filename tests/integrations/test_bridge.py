"""The framework-free Bridge: a turn's calls reserved as one batch, calls without siblings kept
apart, calls a framework never made recorded as not run, and no framework behind `import byref`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

from _waits import scaled
from byref.errors import install_hint
from byref.integrations.bridge import Bridge
from byref.integrations.turns import NOT_RUN
from byref.refs import MessageRef, envelope


def _bridge() -> Bridge:
    bridge = Bridge()
    bridge.adopt("numbers", "Numbers from start.", {
        "type": "object", "properties": {"start": {"type": "integer"}}, "required": ["start"]})
    bridge.adopt("count", "Count items.", {
        "type": "object", "properties": {"items": {"type": "array"}}, "required": ["items"]})
    return bridge


async def _numbers(args: dict[str, Any]) -> list[int]:
    return list(range(args["start"], args["start"] + 10_000))


async def _count(args: dict[str, Any]) -> list[int]:
    return [len(args["items"]), args["items"][0]]


def test_calls_without_siblings_run_concurrently_but_are_recorded_apart() -> None:
    bridge = _bridge()

    async def main() -> list[Any]:
        return list(await asyncio.gather(
            bridge.call("a", "numbers", {"start": 0}, _numbers),
            bridge.call("b", "numbers", {"start": 7}, _numbers)))

    asyncio.run(main())
    record = [(m.role, [p.call_id for p in m.parts]) for m in bridge.transcript]
    assert record == [("assistant", ["a"]), ("tool", ["a"]), ("assistant", ["b"]),
                      ("tool", ["b"])]
    # Each stored result's ref is the address it was recorded at, so it resolves exactly.
    for seq, start in ((1, 0), (3, 7)):
        ref = envelope(MessageRef(part=0, seq=seq, field="value"))
        counted = asyncio.run(bridge.call(f"n{seq}", "count", {"items": ref}, _count))
        assert counted.value == [10_000, start], counted.rendered


def test_a_reserved_call_the_framework_never_made_is_recorded_as_not_run() -> None:
    bridge = _bridge()
    siblings = [("a", "numbers", {"start": 0}), ("b", "numbers", {"start": 1})]
    asyncio.run(bridge.call("a", "numbers", {"start": 0}, _numbers, siblings=siblings))
    assert len(list(bridge.transcript)) == 1  # the turn's tool message waits for "b"
    bridge.settle()
    assistant, tool = list(bridge.transcript)
    assert [p.call_id for p in assistant.parts] == ["a", "b"]
    assert [(p.call_id, p.is_error) for p in tool.parts] == [("a", False), ("b", True)]
    assert tool.parts[1].rendered == NOT_RUN


def test_a_framework_tool_named_like_a_byref_tool_is_refused_saying_what_to_do() -> None:
    with pytest.raises(ValueError, match="'read_json' has the name of a byref tool; rename"):
        Bridge().adopt("read_json", "mine", {"type": "object", "properties": {}})


def test_import_byref_imports_no_framework() -> None:
    code = ("import sys, byref, byref.integrations; "
            "print([m for m in ('pydantic_ai', 'langchain', 'langgraph', 'agents') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=scaled(120), check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("langchain", "langchain", "langchain"),
    ("openai_agents", "agents", "openai-agents"),
])
def test_without_the_framework_the_import_error_names_the_extra(
        module: str, framework: str, extra: str) -> None:
    code = (f"import sys; sys.modules[{framework!r}] = None\n"
            f"try:\n    import byref.integrations.{module}\n"
            "except ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=scaled(120), check=True)
    assert install_hint(extra) in out.stdout


def test_bridge_options_are_checked_by_name_and_not_given_twice() -> None:
    import pytest

    from byref.errors import InvalidValue
    from byref.integrations.bridge import Bridge, bridge_from

    with pytest.raises(InvalidValue, match=r"Unknown option\(s\) \['workingset'\]; byref's "
                       r"integrations take \['budget', 'catalog', 'code_mode', 'emit', 'policy', "
                       r"'scope', 'search', 'store', 'working_set'\] \(and bridge=\)\."):
        Bridge(workingset=3)  # type: ignore[call-arg]
    mine = Bridge(store=None)
    assert bridge_from(mine, {}) is mine
    with pytest.raises(InvalidValue, match=r"Pass bridge= or the bridge's options, not both; "
                       r"got bridge= and \['search'\]\."):
        bridge_from(mine, {"search": True})
