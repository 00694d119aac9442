"""The tool-source port: where tools come from — Python functions, a catalog, an MCP server.

A `ToolSource` lists its tools and calls one by name. A `Harness` or `Session` takes sources
beside plain `Tool`s and declares what they list; cross-cutting behaviour is a thin wrapper
around a source (`Filtered`, `Prefixed`), not a flag on `Tool`. The law: a listed tool is a
real `Tool` whose function reaches the source (no dummy function to patch), so dispatch treats
every tool alike, and a wrapper changes what is listed, never how a call is delivered.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from byref.errors import InvalidValue
from byref.tools.blocks import Blocks
from byref.tools.mcp_content import block_value
from byref.tools.tool import Tool, ToolRefusal


@runtime_checkable
class ToolSource(Protocol):
    """Tools from somewhere. `tools()` lists them (cheap; called when a harness is built);
    `call(name, arguments)` runs one outside dispatch, with arguments already resolved."""

    def tools(self) -> Sequence[Tool]:
        """The tools this source offers, in order."""
        ...

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run tool `name` with resolved `arguments` and return its value."""
        ...


class _Calls:
    """`call` over `tools()`: look the tool up and run its function."""

    def tools(self) -> Sequence[Tool]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        found = {t.name: t for t in self.tools()}.get(name)
        if found is None:
            raise InvalidValue(f"This source has no tool {name!r}; it lists "
                               f"{sorted(t.name for t in self.tools())!r}.")
        if found.wants_ctx:
            raise InvalidValue(f"Tool {name!r} takes a dispatch context; call it through a "
                               "Harness or Session, not source.call(...).")
        value = found.fn(**found.convert(arguments))
        return await value if inspect.isawaitable(value) else value


class ToolSet(_Calls):
    """The in-memory source: a fixed list of tools (from `@tool` functions, say)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools = tuple(tools)
        names = [t.name for t in self._tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidValue(f"Tool names must be unique; repeated: {dupes!r}.")

    def tools(self) -> Sequence[Tool]:
        """The tools, as given."""
        return self._tools


class Listing(Protocol):
    def tools(self) -> Sequence[Tool]: ...


class CatalogSource(_Calls):
    """A discovery `Catalog` (or anything with `tools()`) as a source, listed afresh each time
    so tools the catalog gains later are listed too."""

    def __init__(self, catalog: Listing) -> None:
        self.catalog = catalog

    def tools(self) -> Sequence[Tool]:
        """The catalog's tools now."""
        return tuple(self.catalog.tools())


class Filtered(_Calls):
    """The tools of `source` that `keep` accepts: a predicate on the tool, or a set of names."""

    def __init__(self, source: ToolSource, keep: Callable[[Tool], bool] | Collection[str]
                 ) -> None:
        self.source = source
        if callable(keep):
            self.keep: Callable[[Tool], bool] = keep
        else:
            names = frozenset(keep)
            self.keep = lambda t: t.name in names

    def tools(self) -> Sequence[Tool]:
        """The source's tools that are kept."""
        return tuple(t for t in self.source.tools() if self.keep(t))

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a kept tool through the source."""
        if not any(t.name == name for t in self.tools()):
            raise InvalidValue(f"Tool {name!r} is filtered out of this source.")
        return await self.source.call(name, arguments)


class Prefixed(_Calls):
    """The tools of `source` under `prefix` + name (`"crm_"` → `crm_search`), so two sources
    with the same tool names can sit in one harness. The renamed tools share their originals'
    functions; `call` takes the prefixed name."""

    def __init__(self, source: ToolSource, prefix: str) -> None:
        self.source = source
        self.prefix = prefix
        self._renamed: dict[int, Tool] = {}

    def tools(self) -> Sequence[Tool]:
        """The source's tools under their prefixed names."""
        out = []
        for t in self.source.tools():
            # One renamed Tool per original, so its cached schemas keep declarations stable.
            renamed = self._renamed.get(id(t))
            if renamed is None or renamed.fn is not t.fn:
                renamed = self._renamed[id(t)] = replace(t, name=self.prefix + t.name)
            out.append(renamed)
        return tuple(out)

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool by its prefixed name."""
        if not name.startswith(self.prefix):
            raise InvalidValue(f"Tool {name!r} does not start with this source's prefix "
                               f"{self.prefix!r}.")
        return await self.source.call(name[len(self.prefix):], arguments)


class McpSource(_Calls):
    """The tools of a connected MCP client (`mcp.Client` or `mcp.ClientSession`), listed once
    by `await McpSource.connect(client)`. Each call goes to the server; a tool error comes back
    to the model as a refusal with the server's text."""

    def __init__(self, session: Any, listed: Sequence[Any]) -> None:
        self.session = session
        self._tools = tuple(self._tool(t) for t in listed)

    @classmethod
    async def connect(cls, session: Any) -> McpSource:
        """List the session's tools (every page) and wrap them."""
        listed: list[Any] = []
        cursor = None
        by_cursor = "cursor" in inspect.signature(session.list_tools).parameters  # mcp.Client
        while True:
            if not cursor:
                page = await session.list_tools()
            elif by_cursor:
                page = await session.list_tools(cursor=cursor)
            else:
                page = await session.list_tools(params=_page(cursor))
            listed.extend(page.tools)
            cursor = _field(page, "next_cursor", "nextCursor")
            if not cursor:
                return cls(session, listed)

    def tools(self) -> Sequence[Tool]:
        """The server's tools, as listed at connect."""
        return self._tools

    def _tool(self, listed: Any) -> Tool:
        name = str(listed.name)
        schema = dict(_field(listed, "input_schema", "inputSchema") or {})
        schema.setdefault("type", "object")

        async def call_server(**arguments: Any) -> Any:
            return mcp_value(name, await self.session.call_tool(name, arguments))

        return Tool(name=name, description=str(listed.description or ""), fn=call_server,
                    input_schema=schema)


def _field(obj: Any, name: str, legacy: str) -> Any:
    """`obj.name`, or `obj.legacy` for an SDK that still spells it in camelCase (read only
    then: FastMCP's results warn when the old spelling is touched)."""
    return getattr(obj, name) if hasattr(obj, name) else getattr(obj, legacy, None)


def _page(cursor: str) -> Any:
    from mcp import types  # the `mcp` extra: only a source with a cursor gets here

    return types.PaginatedRequestParams(cursor=cursor)


def mcp_value(name: str, result: Any) -> Any:
    """An MCP `CallToolResult` as a tool's return value: its structured content when it has
    one, else its blocks as the gateway records them (`mcp_content`: text as sent, an image,
    audio or blob a `Payload`; one block as its value, several as `Blocks`); an error is a
    refusal."""
    blocks = list(getattr(result, "content", None) or ())
    if _field(result, "is_error", "isError"):
        texts = [str(b.text) for b in blocks if getattr(b, "type", None) == "text"]
        raise ToolRefusal(f"Tool {name!r} reported an error: {' '.join(texts) or 'no text'}",
                          "upstream-error", result="\n".join(texts) if texts else None)
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None:
        return structured
    values = [block_value(b, name) for b in blocks]
    if len(values) == 1:
        return values[0]
    return Blocks(tuple(values))  # each block shown in its place, never one JSON array


def collect(items: Iterable[Tool | ToolSource]) -> list[Tool]:
    """Plain tools and the tools each source lists, in order."""
    out: list[Tool] = []
    for item in items:
        if isinstance(item, Tool):
            out.append(item)
        elif isinstance(item, ToolSource):
            out.extend(item.tools())
        else:
            raise InvalidValue(f"Expected a Tool or a ToolSource, got {type(item).__name__!r}; "
                               "wrap a plain function with @byref.tool.")
    return out


__all__ = ["CatalogSource", "Filtered", "McpSource", "Prefixed", "ToolSet", "ToolSource",
           "collect", "mcp_value"]
