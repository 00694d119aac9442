"""The built-in tools every placed or stored result may send the model to, in one list, and
which of them a recorded result needs.

The law: a substitute's note names `read_result` and `read_json` / `query_json` (and a marker
can be read with `read_result`, read as JSON when its mediaType is JSON, or shown with
`present`), so whoever can place or store a result makes these callable — the harness and the
gateway take them from here. They are declared from the turn a stored result needs them
(`readers_for`), so a conversation that stores nothing pays no request for them, and nothing
the model is told to call is ever undeclared.
"""

from __future__ import annotations

from typing import Any

from byref.media import is_json
from byref.reads import ReadLimits, ReadRoom
from byref.refs import Blob
from byref.tools.readers.json_tools import query_json, read_json
from byref.tools.readers.present import PRESENT_TOOL_NAME, make_present_tool
from byref.tools.readers.read_result import READ_RESULT_NAME, make_read_result
from byref.tools.tool import Tool
from byref.transcript import Part

JSON_READERS = ("query_json", "read_json")
"""The readers of a stored JSON value (the working set keeps them behind search likewise)."""


def builtin_tools(limits: ReadLimits | None = None, room: ReadRoom | None = None, *,
                  present: bool = True) -> tuple[Tool, ...]:
    """read_json, query_json, read_result (under `limits`, bounded by `room`) and present."""
    tools: list[Tool] = [read_json, query_json, make_read_result(limits, room)]
    if present:
        tools.append(make_present_tool())
    return tuple(tools)


def readers_for(part: Part) -> frozenset[str]:
    """The built-in readers `part` sends the model to: none unless it is a result that stored
    something (a stand-in for a Blob); then `read_result` and `present`, and the JSON readers
    unless every stored value is a marker whose mediaType is not JSON (an image, a PDF)."""
    if part.type != "tool_result" or part.is_error:
        return frozenset()
    stored = [path for path, ref in part.derived.items() if isinstance(ref, Blob)]
    if not stored:
        return frozenset()
    names = {READ_RESULT_NAME, PRESENT_TOOL_NAME}
    for path in stored:
        holder = _holder(part.value, path)
        media = holder.get("mediaType") if isinstance(holder, dict) and holder.get(
            "opaque") is True else None
        # A placed substitute's note names the JSON readers whatever it holds.
        if not isinstance(media, str) or is_json(media):
            names.update(JSON_READERS)
            break
    return frozenset(names)


def _holder(value: Any, path: str) -> Any:
    """The value holding the stand-in at dot-path `path` ("" and a top-level key: the part's
    value itself)."""
    steps = path.split(".")[:-1] if path else []
    for step in steps:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value
