"""Code mode in the integrations (pydantic-ai here): `Byref(code_mode=...)` declares run_code
from the first turn; its program calls byref's own tools (a catalog's) through the bridge's
dispatch, and is refused a framework tool, which runs only in the framework's own call of it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from test_pydantic_ai import Scripted, call, last_return, say

from byref.discovery import Catalog
from byref.integrations.pydantic_ai import Byref
from byref.testing import result_text
from byref.tools import tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox

CODE = """
print(tools.lookup(sku="A-1")["stock"])
try:
    tools.delete_item(sku="A-1")
except tools.ToolError as exc:
    print(exc.reason, exc.text)
"""


def test_run_code_calls_byref_tools_and_is_refused_the_frameworks() -> None:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    deleted: list[str] = []

    @tool
    def lookup(sku: str) -> dict[str, Any]:
        """Look up one item's stock by sku."""
        return {"sku": sku, "stock": len(sku) * 7}

    def delete_item(sku: str) -> str:
        """Delete an item for good."""
        deleted.append(sku)
        return "deleted"

    catalog = Catalog()
    catalog.add(lookup)
    script = Scripted([call("run_code", {"code": CODE}), say("done")])
    agent = Agent(script.model(), tools=[delete_item], capabilities=[
        Byref(catalog=catalog, code_mode=CodeMode(runner=SubprocessRunner()))])
    result = agent.run_sync("look it up, then delete it")
    assert "run_code" in script.tools[0] and "lookup" not in script.tools[0]
    shown = result_text(last_return(result.all_messages()).model_response_str())
    summary, printed = shown.split("\n", 1)
    assert summary.startswith("[run_code] 1 tool call (lookup ×1); refused: "
                              "delete_item (not-permitted) ×1"), summary
    assert printed.splitlines() == [
        "21", "not-permitted Tool 'delete_item' was not called: it belongs to the framework "
        "and runs only in the framework's own call of it, not from code; call it yourself."]
    assert deleted == []


def test_every_integration_sees_run_code_where_it_sees_byrefs_tools() -> None:
    from byref.integrations.bridge import Bridge

    bridge = Bridge(code_mode=True)
    # LangChain and pydantic-ai declare the surface; OpenAI Agents adds byref's own tools.
    assert "run_code" in [d["name"] for d in bridge.surface([]).declarations]
    assert "run_code" in [t.name for t in bridge.own_tools()] and bridge.is_byref("run_code")
    searched = Bridge(code_mode=True, search=True)
    assert "run_code" in [d["name"] for d in searched.surface([]).declarations]
    assert "run_code" not in [d["name"] for d in Bridge().surface([]).declarations]
