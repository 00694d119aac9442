"""What one eval task is: a prompt, the tools an arm runs it with, and the world state to check.

A task builds a fresh `Setup` per arm (its tools record what they received); the scoring reads
that state after the run, never the model's text. `oracle(arm)` is the scripted model that does
the task right in that arm: the upper bound on success and the lower bound on tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from byref.discovery import Discovery
from byref.dispatch import Policy
from byref.harness.scripted import ScriptedModel, Step
from byref.tools import Tool

ARMS = ("inline", "refs", "code")
"""The data arms: results inlined and retyped, passed by ref, or handled in a `run_code` program."""
SELECTION_ARMS = ("direct", "search")
"""The selection arms: every tool declared up front, or the catalog behind `search_tools`."""


@dataclass
class Setup:
    """One arm's tools and the state they keep: `received` holds each input the final tool got."""

    tools: list[Tool]
    final: frozenset[str]
    """The tool (any one of them) whose input decides success."""
    expected: Any
    """What that input must hold, exactly (an object: each of its keys; the input may carry
    more); `None`: any input counts (tool selection)."""
    allowed: frozenset[str]
    """Every tool a right run may call; a call to any other is a wrong tool."""
    policy: Policy | None = None
    code_mode: bool = False
    discovery: Discovery | None = None
    received: list[tuple[str, Any]] = field(default_factory=list)
    called: list[str] = field(default_factory=list)
    """Every suite tool that ran, in order (the built-in readers are not listed)."""
    settle: Callable[[Setup], None] | None = None
    """Called after the run, before scoring: fills `received` from tools that keep their own
    record (the demo's `generate_pdf`)."""

    def tool(self, name: str, description: str, schema: dict[str, Any],
             answer: Callable[[dict[str, Any]], Any]) -> Tool:
        """A suite tool that notes its call (and, for a final tool, its input) and answers
        `answer(input)`."""
        def run(**given: Any) -> Any:
            self.note(name, given)
            return answer(given)

        return Tool(name=name, description=description, fn=run, input_schema=schema)

    def note(self, name: str, given: dict[str, Any]) -> None:
        """Keep a suite tool's call (and a final tool's input)."""
        self.called.append(name)
        if name in self.final:
            self.received.append((name, given))


@dataclass(frozen=True)
class Task:
    """One task of a suite, runnable in each of `arms`."""

    suite: str
    id: str
    prompt: str
    arms: tuple[str, ...]
    build: Callable[[str, Path], Setup]
    """(arm, a scratch directory) → that arm's fresh setup."""
    oracle: Callable[[str], Sequence[Step] | ScriptedModel]
    """arm → the script (or scripted model) of a model that does the task right in that arm."""
    params: dict[str, Any] = field(default_factory=dict)
    """What the report shows beside the id (corpus size, tools in the catalog…)."""
