"""The built-in tools every placed or stored result may send the model to, in one list.

The law: a substitute's note names `read_json` / `query_json` (and a marker can be read with
`read_result` or shown with `present`), so whoever can place or store a result declares these —
the harness and the gateway take them from here, and nothing the model is told to call is ever
undeclared.
"""

from __future__ import annotations

from byref.reads import ReadLimits, ReadRoom
from byref.tools.json_tools import query_json, read_json
from byref.tools.present import make_present_tool
from byref.tools.read_result import make_read_result
from byref.tools.tool import Tool


def builtin_tools(limits: ReadLimits | None = None, room: ReadRoom | None = None, *,
                  present: bool = True) -> tuple[Tool, ...]:
    """read_json, query_json, read_result (under `limits`, bounded by `room`) and present."""
    tools: list[Tool] = [read_json, query_json, make_read_result(limits, room)]
    if present:
        tools.append(make_present_tool())
    return tuple(tools)
