"""Tool metadata and who gets declared what: annotations, titles, icons, `_meta`; modes; call_tool.

Owns three decisions. (1) An upstream tool's metadata (title, annotations, icons, `_meta`) is
kept on its proxied tool and passes to the client on every declaration and in every search_tools
row, so a client's permission prompts and the model both see readOnlyHint / destructiveHint as
the server wrote them. (2) What is declared beside the scaffolding without being in the working
set: in direct mode every catalog tool but the JSON readers (for clients such as Claude Code that
defer tools themselves), in search mode the `alwaysLoad` names and globs. (3) What call_tool may
run (`byref.callTool`): 'all' catalog tools; 'readOnly' only tools annotated readOnlyHint (and
byref's own JSON readers), so a tool that may change things runs only by its own name, where the
client asks the user; 'off' none (call_tool is not declared). byref's read tools declare
`_meta["anthropic/maxResultSizeChars"]`, and through the gateway an explicit read is bounded
below Claude Code's ~25k-token spill threshold, so its answer is never spilled to a file.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from byref.discovery import Catalog
from byref.tools import BUILTIN_JSON_TOOLS, Tool

GATEWAY_EXPLICIT_READ_BYTES = 40 * 1024
"""One explicit read through the gateway: under Claude Code's 25k-token threshold even for dense
JSON (escaped, pretty-printed numbers run ~2.5 characters a token: 64 KiB measured 25.8k tokens),
with room for the answer's own note and coverage."""
MAX_RESULT_SIZE_CHARS = 100_000
"""What byref's read tools declare as `anthropic/maxResultSizeChars`: above any answer they give
through the gateway (explicit reads ≤ 40 KiB, placed previews far less)."""
READ_TOOLS = frozenset({"read_result", "read_json", "query_json"})
MAX_RESULT_META = "anthropic/maxResultSizeChars"
_KEYS = ("title", "annotations", "icons", "execution", "_meta")


def tool_metadata(tool: types.Tool) -> dict[str, Any]:
    """An upstream tool's title, annotations, icons, `execution` (its `taskSupport`) and `_meta`,
    JSON-ready (absent: left out)."""
    dumped = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {k: dumped[k] for k in _KEYS if dumped.get(k) not in (None, {}, [])}


def declared_metadata(name: str, meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata the client is declared for tool `name` (its own, plus byref's for readers)."""
    out = dict(meta or {})
    if name in READ_TOOLS:
        out["_meta"] = {**out.get("_meta", {}), MAX_RESULT_META: MAX_RESULT_SIZE_CHARS}
    return out


def metadata_of(tool: Tool) -> Mapping[str, Any]:
    """The MCP metadata a tool carries (title, annotations, icons, `_meta`), empty for one that has
    none."""
    found = getattr(tool, "mcp_meta", None)
    return found if isinstance(found, Mapping) else {}


def is_read_only(tool: Tool) -> bool:
    """Whether call_tool may run `tool` under 'readOnly': its server says readOnlyHint, or it is
    byref's own (a JSON reader)."""
    if getattr(tool, "server", None) is None:
        return True
    annotations = metadata_of(tool).get("annotations") or {}
    return annotations.get("readOnlyHint") is True


def pinned(catalog: Catalog, *, mode: str, always_load: tuple[str, ...]) -> tuple[Tool, ...]:
    """Catalog tools declared beside the scaffolding whatever the working set holds (direct
    mode: every catalog tool but the JSON readers, which come, as in search mode, from the turn
    a stored result needs them)."""
    if mode == "direct":
        readers = {t.name for t in BUILTIN_JSON_TOOLS}
        return tuple(t for t in catalog.tools() if t.name not in readers)
    if not always_load:
        return ()
    return tuple(t for t in catalog.tools()
                 if any(fnmatch.fnmatchcase(t.name, glob) for glob in always_load))
