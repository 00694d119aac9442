"""The two always-declared scaffolding tools: `search_tools` and `activate_tool`.

The law: finding is decoupled from loading. `search_tools` answers with a menu inside its tool
result and declares nothing, so a broad search can never flood or evict the working set;
`activate_tool` only validates names (an unknown one is refused with "did you mean …", and
nothing is activated), because the working set is a projection of the transcript, not state
the tool keeps. Where the declared tools must not change (`answer_declarations`: a client whose
tool list is fixed), activate_tool answers with the tools' declarations instead, and says how to
run them. Both emit metadata-only events (`searched`, `activated`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from byref.discovery.declaring.workingset import ACTIVATE, DEFAULT_BUDGET, SEARCH
from byref.discovery.lexical.index import FilterError, Filters
from byref.discovery.page.search import DEFAULT_LIMIT, Searcher
from byref.events import Emitter
from byref.tools import Tool, ToolInputError, tool

MAX_LIMIT = 25

SEARCH_DESCRIPTION = (
    "Search the tool catalog (more tools exist than are declared to you) by `query` and/or "
    "intersecting filters: `capabilities` (prefixes, e.g. 'file'), `domains`, `entities`, "
    "`relationships`; `also`: other phrasings, fused ('money back' → refund). Returns a menu of "
    "at most `limit` names and declares nothing: load tools with activate_tool."
)
ACTIVATE_DESCRIPTION = (
    "Load catalog tools by their exact `names` (from search_tools) to call from your next step "
    "on; the least recently used is unloaded when the working set is full."
)
SEARCH_DECLARING = (
    "Search the tool catalog (more tools exist than are declared to you) by `query` and/or "
    "intersecting filters: `capabilities` (prefixes, e.g. 'file'), `domains`, `entities`, "
    "`relationships`; `also`: other phrasings, fused ('money back' → refund). Returns a menu of "
    "at most `limit` names: get the declarations of the ones you need with activate_tool."
)
ACTIVATE_DECLARING = (
    "The declarations (description, input schema) of catalog tools by their exact `names` "
    "(from search_tools); your declared tools do not change."
)
_WORDS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "also": _WORDS, "capabilities": _WORDS,
                   "domains": _WORDS, "entities": _WORDS, "relationships": _WORDS,
                   "limit": {"type": "integer"}},
    "additionalProperties": False,
}
"""Written out: the generated one offers `null` for each filter and repeats the defaults, which
cost every turn (search_tools is always declared) and tell the model nothing."""

_SUGGESTED = 5
"""Unknown names an activate_tool refusal suggests close names for."""


def no_fit_text(unmatched: Sequence[str], roots: Sequence[str]) -> str:
    """The one line of a page that abstained: the words no tool knows, what to try."""
    missing = f" No tool mentions {', '.join(map(repr, unmatched[:5]))}." if unmatched else ""
    try_roots = f" or a capability root ({', '.join(roots[:8])})" if roots else ""
    return f"No tool fits this need.{missing} Try other words{try_roots}."


def discovery_tools(
    searcher: Searcher, *, emit: Emitter | None = None, budget: int = DEFAULT_BUDGET,
    note: str = "", row_extras: Callable[[str], Mapping[str, Any]] | None = None,
    answer_declarations: Callable[[Sequence[str]], str] | None = None,
) -> tuple[Tool, Tool]:
    """`(search_tools, activate_tool)` over `searcher`'s catalog. `note` is appended to
    search_tools' description (what the catalog holds, what is unavailable); `row_extras(name)`
    adds fields to each found tool's menu row (the gateway: its server's title and
    annotations). With `answer_declarations(names)` (the sentence saying how to run those
    tools), activate_tool declares nothing: it answers with the named tools' declarations, as
    their own schemas (no `$ref` alternatives), and that sentence."""
    emitter = emit or Emitter()
    catalog = searcher.catalog
    declaring = answer_declarations is not None

    @tool(name=SEARCH, description=SEARCH_DESCRIPTION)
    def search_tools(
        query: str = "",
        also: list[str] | None = None,
        capabilities: list[str] | None = None,
        domains: list[str] | None = None,
        entities: list[str] | None = None,
        relationships: list[str] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> dict[str, Any]:
        filters = Filters(tuple(capabilities or ()), tuple(domains or ()),
                          tuple(entities or ()), tuple(relationships or ()))
        if not query.strip() and not filters:
            raise ToolInputError(
                "search_tools needs a query or at least one filter. Capability roots in the "
                f"catalog: {', '.join(catalog.capability_roots()) or 'none'}."
            )
        phrasings = [a for a in also or () if isinstance(a, str)]
        try:
            page = searcher.search(query, filters=filters, limit=min(max(1, limit), MAX_LIMIT),
                                   also=phrasings)
        except FilterError as exc:
            raise ToolInputError(str(exc)) from exc
        emitter("searched", query=query, filters=filters.to_json(), candidates=page.candidates,
                matched=page.matched, results=[r.name for r in page.results],
                **({"also": phrasings} if phrasings else {}))
        rows = [r.menu_row() for r in page.results]
        if row_extras is not None:
            for row in rows:
                row.update(row_extras(row["name"]))
        out: dict[str, Any] = {"query": query, "results": rows}
        if filters:
            out["filters"] = filters.to_json()
        if page.unmatched:
            out["unmatched"] = list(page.unmatched)
        if page.results and declaring:
            out["next"] = "Call activate_tool with the names you want for their declarations."
        elif page.results:
            out["next"] = ("Nothing is declared yet: call activate_tool with the names you want "
                           f"(up to {budget} stay loaded).")
        elif page.abstained:
            out["next"] = no_fit_text(page.unmatched, catalog.capability_roots())
        else:
            out["next"] = ("No tool matched. Try other words, fewer words, or a broader filter "
                           "before concluding the capability is missing.")
        return out

    search_tools = replace(search_tools, input_schema=SEARCH_SCHEMA, description=" ".join(
        filter(None, (SEARCH_DECLARING if declaring else SEARCH_DESCRIPTION, note))))

    @tool(name=ACTIVATE, description=ACTIVATE_DECLARING if declaring else ACTIVATE_DESCRIPTION)
    def activate_tool(names: list[str]) -> dict[str, Any]:
        wanted = list(dict.fromkeys(names))
        if not wanted:
            raise ToolInputError("activate_tool needs at least one tool name.")
        unknown = [n for n in wanted if n not in catalog]
        if unknown:
            # Suggestions for the first few only: each is a fuzzy match over the catalog.
            more = len(unknown) - _SUGGESTED
            raise ToolInputError(
                catalog.unknown_text(unknown[:_SUGGESTED])
                + (f" {more} more names are not in the catalog either." if more > 0 else "")
                + " Nothing was activated; call activate_tool again with exact names from a "
                "search_tools result."
            )
        emitter("activated", names=wanted)
        if answer_declarations is not None:
            return {"declarations": [catalog.tool(n).plain_declaration() for n in wanted],
                    "next": answer_declarations(wanted)}
        note = "Loaded from your next step on."
        if len(wanted) > budget:
            note += (f" Only the last {budget} fit in the working set; the others are not "
                     "loaded.")
        return {"activated": wanted, "note": note}

    # Their answers steer the session (and provider adapters read them as they are): no data
    # to pass on, so no ref line under them.
    search_tools.ref_line = activate_tool.ref_line = False
    return search_tools, activate_tool
