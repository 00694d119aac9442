"""Developer misuse raises `byref.errors.InvalidValue` — still a `ValueError`, so existing
`except ValueError` code keeps working — with a message that names the value (`!r`) and says
what fits. Each message is pinned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import byref
from byref.context import RequestBudget
from byref.dispatch import Dispatcher
from byref.harness.providers import parse_model_id
from byref.harness.providers.deferral import NativeDeferral, native_search_tool
from byref.reads import ReadLimits
from byref.reads.coverage import select
from byref.reads.read import Source
from byref.store import Scope
from byref.tools import Tool, rewrite_schema, tool
from byref.tools.run_python.runner import SubprocessRunner
from byref.transcript import Transcript


@tool
def echo(text: str) -> str:
    """Echo."""
    return text


def _wants_tool() -> Tool:
    @tool(wants={"report": "report/pdf"})
    def send(report: str) -> str:
        """Send a report."""
        return report

    return send


CASES: list[tuple[str, Callable[[], Any], str]] = [  # what, the misuse, its message
    ("model id", lambda: parse_model_id("claude"),
     "Model id 'claude' is not 'provider:model' (e.g. 'anthropic:claude-sonnet-4-5' or "
     "'openai:gpt-6.1-sol')."),
    ("provider", lambda: parse_model_id("gemini:pro"),
     "Unknown model provider 'gemini' in 'gemini:pro'; known providers: 'anthropic', "
     "'openai', 'openai-chat'."),
    ("read limit", lambda: ReadLimits(explicit_read_bytes=0),
     "ReadLimits.explicit_read_bytes must be a positive integer, got 0"),
    ("budget", lambda: RequestBudget(0),
     "RequestBudget.max_bytes must be a positive integer, got 0"),
    ("low water", lambda: RequestBudget(1000, low_water=2),
     "RequestBudget.low_water must be in (0, 1], got 2"),
    ("tool name", lambda: Tool("bad name", "", lambda: 1, {"type": "object"}),
     "Tool name 'bad name' must be letters, digits, '_' or '-' (providers reject other "
     "characters)."),
    ("lazy", lambda: Tool("t", "", lambda: 1, {"type": "object"}, lazy=frozenset({"x"})),
     "Tool 't' marks unknown parameter(s) lazy: ['x']."),
    ("schema", lambda: rewrite_schema({"type": "array"}),
     "A tool's input schema must be a JSON object schema (type 'object'), got 'array'."),
    ("duplicate tools", lambda: Dispatcher([echo, echo], transcript=Transcript(), store=None,
                                           scope=Scope("t")),
     "Tool names must be unique; repeated: ['echo']."),
    ("wants without a store", lambda: Dispatcher([_wants_tool()], transcript=Transcript(),
                                                 store=None, scope=Scope("t")),
     "Tool(s) ['send'] declare `wants` but no artifact store is attached; pass "
     "store=MemoryStore() (or any ArtifactStore) when building the agent."),
    ("search limit", lambda: native_search_tool(lambda q, n: [], limit=0),
     "A search limit must be at least 1, got 0."),
    ("deferral", lambda: NativeDeferral().check({"echo"}),
     "Native deferral needs the search tool 'search_tools' among the declared tools; add "
     "native_search_tool(search) to the harness's tools."),
    ("runner", lambda: SubprocessRunner(isolation="maybe"),  # type: ignore[arg-type]
     "isolation must be 'required' or 'none', not 'maybe'"),
    ("selection", lambda: select([1, 2], offset=-1, limit=None, max_bytes=100),
     "offset must be >= 0, got -1"),
    ("source", lambda: Source(), "Source needs exactly one of items= or text="),
    ("present", lambda: byref.Harness(byref.ScriptedModel([]), [_present()]),
     "The tool name 'present' is reserved when an artifact store is attached (byref "
     "attaches its own); rename yours."),
    ("shape", lambda: byref.Session().declarations("gemini"),  # type: ignore[arg-type]
     "Unknown provider shape 'gemini'; use one of 'anthropic', 'openai', 'openai-chat', "
     "'mcp'."),
]


def _present() -> Tool:
    @tool(name="present")
    def mine(x: int) -> int:
        """Mine."""
        return x

    return mine


@pytest.mark.parametrize(("what", "misuse", "message"), CASES, ids=[c[0] for c in CASES])
def test_misuse_is_an_invalid_value_with_a_pinned_message(
        what: str, misuse: Callable[[], Any], message: str) -> None:
    with pytest.raises(byref.InvalidValue) as caught:
        misuse()
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, byref.DeveloperError)
    assert str(caught.value) == message
