"""Built-in `read_json` and `query_json`: a bounded preview plus a derived recipe for the whole.

The law: the model gets enough to decide (count, shape, first items) and an address for the exact
value; the recipe behind that address is recorded server-side and shown to the model only as a
Message ref to the result's own `value` field, evaluated again whenever a tool resolves it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NotRequired, TypedDict

from byref.jsonview import bounded, shape_hint
from byref.refs import MODEL_REF_SCHEMA, Clause, JsonPointer, JsonQuery, Ref
from byref.tools.call_context import ToolContext
from byref.tools.tool import Tool, ToolInputError, tool

PREVIEW_CHARS = 5_000
_SAMPLE = 50  # matches kept for the preview and the shape hint
"""Characters of preview per read (the hard ceiling for previews is 6,000)."""


class FilterClause(TypedDict):
    """Keep items whose `field` (dot-path) equals `eq`, or whose string contains `contains`."""

    field: str
    eq: NotRequired[Any]
    contains: NotRequired[str]


def _clauses(raw: list[FilterClause]) -> tuple[Clause, ...]:
    out = []
    for item in raw:
        has_eq, has_contains = "eq" in item, "contains" in item
        if has_eq == has_contains:
            raise ToolInputError(
                f"Each filter clause needs exactly one of 'eq' or 'contains', got {dict(item)!r}."
            )
        if has_eq:
            out.append(Clause.equals(item["field"], item["eq"]))
        else:
            out.append(Clause.containing(item["field"], item["contains"]))
    return tuple(out)


def _check_path(path: str) -> None:
    if path and not path.startswith("/"):
        raise ToolInputError(
            f"'path' is a JSON Pointer: empty for the whole document, or starting with '/' "
            f"such as '/items'; got {path!r}."
        )


# The declared schemas are written out: the generated ones repeat the descriptions (a titled
# `$defs` entry for the clause) and offer `null` for every optional argument, which cost a
# model-facing character on every turn and told the model nothing it needs.
_PATH: dict[str, Any] = {"type": "string", "default": ""}
_CLAUSE: dict[str, Any] = {
    "type": "object",
    "properties": {"field": {"type": "string"}, "eq": {}, "contains": {"type": "string"}},
    "required": ["field"],
}


def _read_json(source: Ref, ctx: ToolContext, path: str = "") -> dict[str, Any]:
    _check_path(path)
    recipe = JsonPointer(source, path)
    node = ctx.resolver.value(recipe)
    return {
        "shape": shape_hint(node),
        "preview": bounded(node, PREVIEW_CHARS),
        "value": recipe,
    }


read_json = replace(
    tool(name="read_json", capabilities=("data:json.read",),
         glossary=("preview", "pointer", "inspect"),
         description=("Preview the JSON value at `path` (a JSON Pointer; '' is the whole "
                      "document) in `source`: its shape, a bounded preview and `value`, a ref "
                      "to exactly that value for any tool argument."))(_read_json),
    input_schema={"type": "object", "properties": {"source": MODEL_REF_SCHEMA, "path": _PATH},
                  "required": ["source"], "additionalProperties": False})


def _query_json(
    source: Ref, ctx: ToolContext, path: str = "", filter: list[FilterClause] | None = None
) -> dict[str, Any]:
    _check_path(path)
    recipe = JsonQuery(source, path, _clauses(filter or []))
    # Count and sample while streaming: the matches are not held here, only their first few.
    count, head = 0, []
    for item in ctx.resolver.iterate(recipe):
        if count < _SAMPLE:
            head.append(item)
        count += 1
    shown = bounded(head, PREVIEW_CHARS)
    shown_count = len(shown) if isinstance(shown, list) else 0
    if shown_count and isinstance(shown[-1], str) and shown[-1].startswith("… "):
        shown_count -= 1
    if isinstance(shown, list) and count > len(head):
        hidden = count - shown_count
        shown = [*shown[:shown_count], f"… {hidden:,} more items"]
    return {
        "count": count,
        "shape": shape_hint(head).replace(f"{len(head):,} item", f"{count:,} item", 1),
        "preview": shown,
        "previewNote": f"{shown_count} of {count:,} items shown, long strings elided",
        "value": recipe,
    }


query_json = replace(
    tool(name="query_json", capabilities=("data:json.query",),
         glossary=("filter", "where", "select", "rows"),
         description=("Filter the JSON array at `path` (a JSON Pointer such as '/items') in "
                      "`source`, keeping items that match every `filter` clause, "
                      '{"field": "a.b", "eq": value} or {"field": "a.b", "contains": "text"}: '
                      "their count, shape, a bounded preview and `value`, a ref to exactly "
                      "those items for any tool argument."))(_query_json),
    input_schema={"type": "object", "properties": {
        "source": MODEL_REF_SCHEMA, "path": _PATH,
        "filter": {"type": "array", "items": _CLAUSE}},
        "required": ["source"], "additionalProperties": False})


BUILTIN_JSON_TOOLS: tuple[Tool, ...] = (read_json, query_json)
