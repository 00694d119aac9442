"""What discovery declares each turn: which tool declarations and which system lines.

The law: everything static first and byte-identical while nothing changed; the one varying line
("You currently have N of M activated tools loaded.") last. Declarations are the scaffolding
plus the working set, name-sorted, each through `Tool.declaration()` (whose rewritten schema is
cached by identity), so the block only changes when the set's membership does. Undiscovered
tools cost one shared line: `<tool_capabilities>` with the deduplicated capability roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.declaring.workingset import ACTIVATE, DEFAULT_BUDGET, SEARCH, working_set
from byref.jsonview import dumps
from byref.tools import Tool
from byref.transcript import Transcript

PLAIN = frozenset({SEARCH, ACTIVATE})
"""Declared without `$ref` alternatives: a search query, filter ids and tool names are a few
words the model types, never a Message or Blob worth referencing, and the alternative on each of
their seven parameters cost 1,275 characters of every turn (measured on the MCP catalog)."""


@dataclass(frozen=True)
class Declared:
    """What one model request declares and appends to its system text."""

    declarations: list[dict[str, Any]]
    """Name-sorted tool declarations for the request."""
    system_lines: list[str]
    """Append to the system text in this order; the last line is the only one that varies."""
    working_set: tuple[str, ...]
    """Activated catalog tools, most recently touched first."""

    def chars(self) -> int:
        """Characters this costs in a request: system lines plus declarations (as JSON)."""
        return len("\n\n".join(self.system_lines)) + len(dumps(self.declarations))


def instruction(catalog: Catalog, budget: int) -> str:
    """The standing system line that explains search_tools, activate_tool and the budget."""
    return (
        f"Your declared tools are a working set, not the whole catalog: {len(catalog)} tools "
        "exist, grouped by the capability roots below. Find tools with search_tools (free text "
        "and/or filters); a search declares nothing. Load the ones you need with "
        f"activate_tool; up to {budget} stay loaded, a tool you call stays loaded, and the "
        "least recently used is unloaded first. Never claim a capability is unavailable "
        "without searching for it first."
    )


def capability_line(catalog: Catalog) -> str:
    """The catalog's capability roots as one `<tool_capabilities>` line."""
    return f"<tool_capabilities>{', '.join(catalog.capability_roots())}</tool_capabilities>"


def loaded_line(count: int, budget: int) -> str:
    """How many of the budget's activated tools are loaded (the one line that varies)."""
    return f"You currently have {count} of {budget} activated tools loaded."


def declare(
    catalog: Catalog,
    scaffolding: Sequence[Tool],
    transcript: Transcript,
    *,
    budget: int = DEFAULT_BUDGET,
    refs: bool = True,
) -> Declared:
    """The declarations and system lines for the next request, from the transcript alone."""
    fixed = {t.name: t for t in scaffolding}
    active = working_set(transcript, catalog, budget=budget, always=fixed)
    chosen = dict(fixed)
    for name in active:
        chosen[name] = catalog.tool(name)
    ordered = [chosen[n] for n in sorted(chosen)]
    declarations = [t.declaration() if refs and t.name not in PLAIN else t.plain_declaration()
                    for t in ordered]
    lines = [instruction(catalog, budget), capability_line(catalog),
             loaded_line(len(active), budget)]
    return Declared(declarations, lines, tuple(active))
