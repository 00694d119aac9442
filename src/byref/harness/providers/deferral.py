"""Provider-native deferral: the whole catalog declared deferred, byref's search loading tools.

The law: in native mode every tool except the search tool (and any named always-loaded) is
declared once, with the provider's deferred flag, on every turn, so activating a tool never
changes the cached prefix. The search tool is an ordinary byref `Tool` that the harness
dispatches like any other; it records the names it found as `{"query": …, "tools": [names]}`, and
each adapter turns that recorded result into the provider's native form when it renders the
request (Anthropic `tool_reference` blocks, OpenAI `tool_search_output`). The rendering is a pure
function of the transcript, so it is byte-identical on every later turn.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from byref.errors import InvalidValue
from byref.harness.messages import Block
from byref.jsonview import decode
from byref.tools import Tool, tool

if TYPE_CHECKING:
    from byref.discovery import Catalog, Discovery, Searcher

SearchFn = Callable[..., Sequence[str]]
"""A search engine: a free-text query → matching tool names, best first. Called as
`search(query)`; an engine that also takes `also` (other phrasings of the same need, as
`discovery_search`'s does) is called as `search(query, also=[...])` and the model is told so."""

SEARCH_DESCRIPTION = (
    "Find tools by what they do. Most tools are not loaded until found: describe the task in a "
    "few words (e.g. 'export work items', 'make a pdf report') and the matching tools become "
    "callable. Never claim a capability is unavailable without searching for it first."
)
ALSO_DESCRIPTION = " `also`: other phrasings of the same need, fused ('money back' → refund)."


@dataclass(frozen=True)
class NativeDeferral:
    """Which declared tool is the search tool, and which tools are never deferred."""

    search_tool: str = "search_tools"
    always_loaded: frozenset[str] = frozenset()

    def deferred(self, name: str) -> bool:
        """Whether `name` is declared deferred (all but the search and always-loaded tools)."""
        return name != self.search_tool and name not in self.always_loaded

    def check(self, declared: Iterable[str]) -> None:
        """Refuse a declaration set without the search tool (deferred tools could never load)."""
        names = set(declared)
        if self.search_tool not in names:
            raise InvalidValue(
                f"Native deferral needs the search tool {self.search_tool!r} among the declared "
                "tools; add native_search_tool(search) to the harness's tools."
            )

    def found(self, block: Block, calls: Mapping[str, str],
              declared: Collection[str]) -> list[str] | None:
        """The deferred tool names a search result loads, or None if `block` is not one.

        `calls` maps call ids to tool names over the request (see `call_names`)."""
        if block.type != "tool_result" or block.is_error:
            return None
        if calls.get(block.id) != self.search_tool:
            return None
        names = recorded_names(block.text)
        if names is None:
            return None
        # A name the catalog does not declare (or one already loaded) cannot be referenced: the
        # provider would reject the whole request for one stale search hit.
        return [n for n in names if n in declared and self.deferred(n)]


def recorded_names(text: str) -> list[str] | None:
    """The `tools` list of a recorded search result, or None if the text is not one."""
    try:
        value: Any = decode(text)
    except Exception:
        return None
    if not isinstance(value, dict):
        return None
    names = value.get("tools")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return list(dict.fromkeys(names))


def native_search_tool(
    search: SearchFn, *, name: str = "search_tools", limit: int = 5,
    description: str = SEARCH_DESCRIPTION,
) -> Tool:
    """The byref tool the model calls to find (and so load) deferred tools."""
    if limit < 1:
        raise InvalidValue(f"A search limit must be at least 1, got {limit!r}.")
    if not _takes_also(search):
        @tool(name=name, description=description, capabilities=("tool.search",))
        def search_tools(query: str) -> dict[str, Any]:
            names = list(dict.fromkeys(search(query)))[:limit]
            return {"query": query, "tools": names}

        search_tools.ref_line = False  # the adapter reads its answer as it is: no ref line
        return search_tools

    @tool(name=name, description=description + ALSO_DESCRIPTION, capabilities=("tool.search",))
    def search_tools_also(query: str, also: list[str] | None = None) -> dict[str, Any]:
        phrasings = [a for a in also or () if isinstance(a, str) and a.strip()]
        names = list(dict.fromkeys(search(query, also=phrasings)))[:limit]
        return {"query": query, "tools": names, **({"also": phrasings} if phrasings else {})}

    search_tools_also.ref_line = False
    return search_tools_also


def _takes_also(search: SearchFn) -> bool:
    try:
        parameters = inspect.signature(search).parameters
    except (TypeError, ValueError):  # a builtin or C callable: called with the query only
        return False
    also = parameters.get("also")
    return also is not None and also.kind in (inspect.Parameter.KEYWORD_ONLY,
                                              inspect.Parameter.POSITIONAL_OR_KEYWORD)


def discovery_search(source: Catalog | Searcher | Discovery, *, limit: int = 5) -> SearchFn:
    """A `SearchFn` over byref's own engine (field-boosted BM25, rarity re-rank, exact names
    first, other phrasings fused), so native mode finds exactly what byref's search_tools
    would."""
    from byref.discovery import Discovery, Searcher

    if isinstance(source, Discovery):
        searcher = source.searcher
    elif isinstance(source, Searcher):
        searcher = source
    else:
        searcher = Searcher(source)

    def search(query: str, *, also: Sequence[str] = ()) -> list[str]:
        return [result.name for result in searcher.search(query, limit=limit, also=also).results]

    return search
