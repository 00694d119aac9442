"""Code mode in a gateway's first seconds: `tools.<name>` of a server still starting says so as
`tools.call` does (and runs once it is up), and a program that raises keeps what it printed."""

from __future__ import annotations

from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.store import MemoryStore
from byref.tools import tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

STARTING = ("'git__git_log' cannot run yet: server 'git' is still starting (its tools are "
            "announced when it is ready); try again then.")


def _run(code: str) -> Part:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")

    @tool
    def lookup(sku: str) -> dict[str, Any]:
        """Look up one item's stock by sku."""
        return {"sku": sku, "stock": len(sku)}

    h = Harness(ScriptedModel([call("run_code", {"code": code}), say("done")]), [lookup],
                store=MemoryStore(), code_mode=CodeMode(runner=SubprocessRunner()))
    # What a gateway hands its dispatcher: the words for a tool whose server is still starting.
    h.session.dispatcher.unknown_tool = lambda name: STARTING if name.startswith("git__") else None
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def test_a_tool_of_a_server_still_starting_says_so_by_attribute_as_by_call() -> None:
    part = _run(
        "for how in ('attribute', 'call'):\n"
        "    try:\n"
        "        if how == 'attribute':\n"
        "            tools.git__git_log(max_count=1)\n"
        "        else:\n"
        "            tools.call('git__git_log', max_count=1)\n"
        "    except tools.ToolError as exc:\n"
        "        print(how, '->', exc.text)\n"
        "try:\n"
        "    tools.no_such_tool\n"
        "except AttributeError as exc:\n"
        "    print('unknown ->', exc)\n")
    text = part.rendered or ""
    assert not part.is_error, text
    assert f"attribute -> {STARTING}" in text
    assert f"call -> {STARTING}" in text
    assert "unknown -> there is no tool 'no_such_tool'" in text  # a name that is no tool at all


def test_what_a_program_printed_before_it_raised_is_in_the_result() -> None:
    part = _run("print('fetched 3 rows')\nprint(tools.lookup(sku='abc'))\n"
                "raise ValueError('the fourth row is missing')\n")
    text = part.rendered or ""
    assert part.is_error
    assert "Your program exited with code 1. It printed (last 2,000 chars):\n" in text, text
    assert "fetched 3 rows\n{'sku': 'abc', 'stock': 3}\n" in text
    assert "ValueError: the fourth row is missing" in text
