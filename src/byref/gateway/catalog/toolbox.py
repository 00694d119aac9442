"""The gateway's toolbox: one immutable build of what it offers, and the catalog of upstream tools.

Owns `Toolbox` (the catalog, the scaffolding, what is pinned, why a server is missing, which are
still starting) and `upstream_catalog` (every listed upstream tool as a proxied byref tool, under a
server-qualified name, kept by the entry's allow/deny globs and a grant's, plus the JSON readers).
The law: a toolbox never changes; a tool-list change builds a new one with a higher version, so a
scope's session over an old version is rebuilt, never patched. Each build has two faces over one
catalog: the handshake era's (activate_tool grows the client's tool list) and `stable` (a
2026-07-28 client's list never changes with its requests: activate_tool answers with
declarations, run through call_tool).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Final

import mcp_types as types

from byref.discovery import Catalog
from byref.discovery.catalog.mcp import server_slug
from byref.dispatch import Call
from byref.gateway.access.bearer import permits_server, permits_tool
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.convert import distinct_name, listing, qualified_name
from byref.gateway.catalog.metadata import is_read_only, tool_metadata
from byref.gateway.catalog.proxy import Invoke, proxied_tool
from byref.gateway.config.file import GatewayConfig, Grant
from byref.tools import BUILTIN_JSON_TOOLS, Tool

CALL_TOOL = "call_tool"
CALL_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "arguments": {"type": "object"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
# The parameters are explained once, here: property descriptions repeating it cost every turn.
CALL_TOOL_DESCRIPTION = (
    "Run a catalog tool without loading it: `name` exactly as search_tools gave it, `arguments` "
    "its own (any may be a $ref). Use it too when a loaded tool is missing from your tools.")


def read_only_refusal(name: str) -> str:
    """Why call_tool (and code, under the same policy) does not run `name` when callTool is
    'readOnly' and `name` is not annotated read-only."""
    return (f"call_tool runs only read-only tools here (byref.callTool is 'readOnly'); "
            f"{name!r} may change things: load it with activate_tool and call it by its own "
            "name, so your client can ask the user first.")


@dataclass(frozen=True)
class Toolbox:
    """One build of what the gateway offers: the catalog, the scaffolding, what is pinned, and why
    any server is missing from it. Immutable; a tool-list change builds a new one."""

    version: int
    catalog: Catalog
    scaffolding: tuple[Tool, ...]
    tools: tuple[Tool, ...]
    unavailable: dict[str, str]
    """Server → why its tools are missing from the catalog."""
    pinned: tuple[Tool, ...] = ()
    """Declared beside the scaffolding whatever the working set holds (direct mode: every
    catalog tool; search mode: byref.alwaysLoad)."""
    call_tool: str = "all"
    """What call_tool may run: 'all', 'readOnly' or 'off' (see `catalog/metadata.py`)."""
    starting: tuple[str, ...] = ()
    """Servers still starting when this box was built (their tools are not in it yet)."""
    search: Callable[[str, int], list[dict[str, Any]]] | None = None
    """The catalog's search as code mode's `tools.search` asks it: query, limit → rows."""
    declaring: tuple[Tool, ...] = ()
    """The scaffolding of the `stable` face (its activate_tool answers with declarations)."""
    stable_lists: bool = False
    """This is the `stable` face: what it declares never changes with a client's requests."""

    @cached_property
    def stable(self) -> Toolbox:
        """This build as a client whose tool list must not change with its requests sees it
        (2026-07-28): scaffolding and pinned tools only, activation answered in the result."""
        if self.stable_lists or not self.declaring:
            return self
        upstream = self.tools[len(self.scaffolding):]
        return replace(self, scaffolding=self.declaring, tools=(*self.declaring, *upstream),
                       declaring=(), stable_lists=True)

    @cached_property
    def always(self) -> frozenset[str]:
        """The names declared whatever the working set holds (scaffolding and pinned): they
        take no working-set slot. One set per box (it never changes), not one per call."""
        return frozenset(t.name for t in (*self.scaffolding, *self.pinned))

    @cached_property
    def names(self) -> frozenset[str]:
        """Every name a call may run here (the scaffolding and the catalog)."""
        return frozenset(t.name for t in self.tools)

    def server_of(self, name: str) -> str:
        """A metric's server label: the upstream of a catalog tool, else `byref` (its own)."""
        server = self.catalog.entry(name).server if name in self.catalog else None
        return server if server is not None else "byref"

    def labels(self, name: str) -> tuple[str, str]:
        """A call's metric labels, server and tool: a name this box does not hold is `unknown`
        (a label is never a value a model wrote)."""
        return (self.server_of(name), name) if name in self.names else ("byref", "unknown")

    def is_local(self, name: str) -> bool:
        """Run by byref itself (scaffolding, the JSON readers, run_code), not proxied to an
        upstream."""
        return name not in self.catalog or self.catalog.entry(name).server is None

    def records_alone(self, name: str) -> bool:
        """Whether a call of `name` is recorded under the scope's lock, nothing landing between
        the call and its result: byref's own tools, whose results may carry recipes naming
        their seq. Not a tool that calls tools (run_code): its result is text, values and
        stored refs (never a recipe; its ref line moves to where it lands), and its program
        may run for minutes — the conversation's other calls, and its inner calls, go on."""
        if not self.is_local(name):
            return False
        return name not in self.catalog or not self.catalog.tool(name).calls_tools

    def still_starting(self, name: str) -> str | None:
        """The refusal for a tool of a server still starting (not yet listed), else None."""
        if not self.starting:
            return None
        for server in self.starting:
            if name.startswith(f"{server_slug(server)}__"):
                return (f"{name!r} cannot run yet: server {server!r} is still starting (its "
                        "tools are announced when it is ready); try again then.")
        return None

    def unwrap(self, call: Call) -> Call:
        """`call_tool(name, arguments)` for a catalog tool, as that tool's own call (else the
        call itself: call_tool then runs and refuses, saying why)."""
        if call.name != CALL_TOOL or not isinstance(call.input, dict) or self.call_tool == "off":
            return call
        target, args = call.input.get("name"), call.input.get("arguments", {})
        if not isinstance(target, str) or target not in self.catalog or not set(call.input) <= {
                "name", "arguments"}:
            return call
        if self.call_tool == "readOnly" and not is_read_only(self.catalog.tool(target)):
            return call  # refused by call_tool itself, saying why
        return Call(call.id, target, {} if args is None else args)


def upstream_catalog(config: GatewayConfig, listings: Mapping[str, list[types.Tool]],
                     invoke: Invoke, passed: Passed | None, grant: Grant | None) -> Catalog:
    """Every listed upstream tool a grant may see, as a proxied tool under its server-qualified
    name (a clash between two servers' names gets a distinct one), then the JSON readers."""
    catalog = Catalog()
    for server in config.servers:
        if not permits_server(grant, server.name):
            continue
        raw = {t.name: t for t in listings.get(server.name, [])}
        for listed in listing(server.name, listings.get(server.name, [])):
            if not server.keeps(listed.name):  # the entry's "tools" allow/deny globs
                continue
            name = qualified_name(server.name, listed.name)
            if not permits_tool(grant, name):  # a grant's tool globs: as clients name it
                continue
            if name in catalog and _pair(catalog, name) != (server.name, listed.name):
                name = distinct_name(server.name, listed.name)  # another pair joined alike
            if name not in catalog:  # a server listing one name twice: the first wins
                meta = tool_metadata(raw[listed.name]) if listed.name in raw else {}
                catalog.add(proxied_tool(name, listed, invoke, passed=passed, mcp_meta=meta),
                            server=server.name, original_name=listed.name)
    # The JSON readers sit behind search: a stored result touches them (working set), so they
    # are declared from the turn a result needs them, and cost nothing before it.
    for reader in BUILTIN_JSON_TOOLS:
        catalog.add(reader)
    return catalog


def _pair(catalog: Catalog, name: str) -> tuple[str | None, str]:
    entry = catalog.entry(name)
    return entry.server, entry.original_name


THROUGH_CALL_TOOL: Final = (
    "Run them with call_tool(name, arguments): one round trip (called by its own name, a tool "
    "not in your client's list makes it list tools first: two). Any argument may be a $ref.")
"""A declaring activate_tool's answer when call_tool runs every named tool."""


def how_to_run(call_tool: str, catalog: Catalog, names: Sequence[str]) -> str:
    """What a declaring activate_tool tells the model about running `names` (through call_tool
    where `call_tool` — 'all', 'readOnly' or 'off' — lets it, else by their own names), and
    which way is one round trip: a 2026-07-28 SDK client lists tools again before calling a name
    its list lacks, so a call by the tool's own name is two."""
    if call_tool == "all":
        return THROUGH_CALL_TOOL
    through = [n for n in names if call_tool == "readOnly" and is_read_only(catalog.tool(n))]
    if len(through) == len(names):
        return THROUGH_CALL_TOOL
    direct = ", ".join(repr(n) for n in names if n not in through)
    tail = (" Run the others with call_tool(name, arguments): one round trip."
            if through else "")
    return (f"Call {direct} by its own name (call_tool does not run it here; your client may "
            f"list tools first, a second round trip). Any argument may be a $ref.{tail}")
