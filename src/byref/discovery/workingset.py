"""The working set: which catalog tools are declared, as a pure projection of the transcript.

The law (seed 001): no session state. Walking the transcript newest to oldest, an
`activate_tool` call adds its names (later names in one call count as more recent), a direct
call to a catalog tool keeps it warm, and the most recently touched tools up to the budget are
the set; the least recently touched fall off. An activation the dispatcher refused (unknown
names) adds nothing. Replaying a transcript always gives the same set.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from typing import Any

from byref.transcript import Transcript

DEFAULT_BUDGET = 8
ACTIVATE = "activate_tool"
SEARCH = "search_tools"


def working_set(
    transcript: Transcript,
    catalog: Container[str],
    *,
    budget: int = DEFAULT_BUDGET,
    always: Container[str] = (),
) -> list[str]:
    """Catalog tool names to declare, most recently touched first, at most `budget`.

    `always` names (the scaffolding) are declared anyway and take no slot.
    """
    if budget < 0:
        raise ValueError(f"The working-set budget must be ≥ 0, got {budget!r}.")
    out: list[str] = []
    seen: set[str] = set()
    for name in touches(transcript):
        if len(out) >= budget:
            break
        if name in seen or name not in catalog or name in always:
            continue
        seen.add(name)
        out.append(name)
    return out


def touches(transcript: Transcript) -> Iterator[str]:
    """Every tool touch, newest first: activated names and direct calls."""
    messages = list(transcript)
    refused = {
        part.call_id
        for message in messages
        for part in message.parts
        if part.type == "tool_result" and part.is_error and part.call_id is not None
    }
    for message in reversed(messages):
        for part in reversed(message.parts):
            if part.type != "tool_call":
                continue
            value: Any = part.value if isinstance(part.value, dict) else {}
            name = part.tool or value.get("name")
            if name == ACTIVATE:
                if part.call_id in refused:
                    continue
                yield from reversed(_names(value.get("input")))
            elif isinstance(name, str) and name != SEARCH:
                yield name


def _names(raw: Any) -> list[str]:
    names = raw.get("names") if isinstance(raw, dict) else None
    if isinstance(names, str):
        return [names]
    if isinstance(names, list):
        return [n for n in names if isinstance(n, str)]
    return []
