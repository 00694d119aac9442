"""`import byref` is the front door: the names a user needs, pinned, loaded on first use."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import byref
from _source import parse
from _waits import scaled

FRONT_DOOR = [
    "Blob", "ByrefError", "Catalog", "DeveloperError", "Discovery", "Gateway", "Harness",
    "InvalidValue", "Limits", "MessageRef", "OperatorError", "Payload", "Policy", "Refused",
    "Scope", "ScriptedModel", "Session", "Tool", "ToolRefusal", "ToolSource", "__version__",
    "builtin_tools", "call", "load_config", "model_from_id", "open_store", "say", "tool",
]


def test_the_front_door_exports_exactly_the_pinned_names() -> None:
    assert byref.__all__ == FRONT_DOOR
    assert sorted(dir(byref)) == FRONT_DOOR
    for name in FRONT_DOOR:
        assert getattr(byref, name) is not None, name


def test_type_checkers_see_each_name_where_it_is_loaded_from() -> None:
    """The TYPE_CHECKING imports re-export each lazy name from the module the table names."""
    import ast
    from pathlib import Path

    tree = parse(Path(byref.__file__))
    guarded = next(n for n in tree.body if isinstance(n, ast.If)
                   and getattr(n.test, "id", None) == "TYPE_CHECKING")
    seen = {alias.asname: node.module for node in guarded.body
            if isinstance(node, ast.ImportFrom) for alias in node.names
            if alias.asname == alias.name}
    assert seen == byref._EXPORTS


def test_importing_byref_loads_neither_the_gateway_nor_the_sdks() -> None:
    code = ("import sys, byref; byref.tool; byref.Harness; "
            "print(sorted(m for m in ('mcp', 'anthropic', 'openai', 'byref.gateway') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=scaled(60))
    assert out.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        byref.Nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "module 'byref' has no attribute 'Nope'" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("byref.Nope resolved")


def test_every_error_byref_raises_on_purpose_has_one_root() -> None:
    from byref.dispatch.calls import Refusal
    from byref.errors import DeveloperError, OperatorError, Refused
    from byref.gateway import ConfigError
    from byref.harness.providers import MissingKeyError, ProviderError
    from byref.jsonview import JsonEncodeError, NotJsonError, StaleSelectionError
    from byref.refs import RefRefusal
    from byref.resolve import ResolveError
    from byref.store import ArtifactError
    from byref.store.port import ArtifactIntegrityError, StoreUnavailableError
    from byref.tools import ToolRefusal
    from byref.transcript import TranscriptCorruptError, TranscriptLookupError

    for refused in (RefRefusal, ResolveError, TranscriptLookupError, NotJsonError,
                    StaleSelectionError, ToolRefusal, Refusal):
        assert issubclass(refused, Refused)
    for developer in (MissingKeyError, JsonEncodeError):
        assert issubclass(developer, DeveloperError)
    for operator in (ArtifactError, ArtifactIntegrityError, StoreUnavailableError, ConfigError,
                     ProviderError, TranscriptCorruptError):
        assert issubclass(operator, OperatorError)
    # the stdlib bases callers already catch are kept
    assert issubclass(RefRefusal, ValueError) and issubclass(ConfigError, ValueError)


def test_the_harness_takes_a_model_id(monkeypatch: Any) -> None:
    from byref.harness.providers import MissingKeyError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    try:
        byref.Harness("anthropic:claude-sonnet-4-6", [])
    except MissingKeyError as exc:  # the id was parsed and the adapter asked for its key
        assert isinstance(exc, byref.DeveloperError) and "ANTHROPIC_API_KEY" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("no key was asked for")


def test_an_async_tool_runs_through_the_sync_harness_and_the_readers_come_when_stored(
) -> None:
    import asyncio

    @byref.tool
    async def fetch(n: int) -> list[int]:
        """Fetch n numbers."""
        await asyncio.sleep(0)
        return list(range(n))

    model = byref.ScriptedModel([byref.call("fetch", {"n": 3}), byref.call("fetch", {"n": 9_000}),
                                 byref.say("ok")])
    run = byref.Harness(model, [fetch]).run_sync("go")
    assert run.text == "ok"
    results = [p for m in run.transcript for p in m.parts if p.type == "tool_result"]
    assert results[0].value == [0, 1, 2] and not results[0].is_error
    declared = [{t["name"] for t in r.tools} for r in run.requests]
    assert declared[0] == declared[1] == {"fetch"}  # nothing stored: no reader declared
    assert {"read_json", "query_json", "read_result", "present"} <= declared[2]
