"""A model's input before dispatch reads it: a `null` that means "not given" is dropped.

The law: `null` for an optional parameter whose schema has no null is an absent argument (many
models, OpenAI's strict mode among them, write null rather than leave one out); a null the schema
takes, or one for a required parameter, stays and meets validation as written.
"""

from __future__ import annotations

from typing import Any

from byref.tools.tool import Tool


def without_absent_nulls(tool: Tool, raw: dict[str, Any]) -> dict[str, Any]:
    """`null` for an optional parameter whose schema has no null means "not given": many models
    (OpenAI's strict mode among them) write null rather than leave an argument out."""
    for value in raw.values():
        if value is None:
            break
    else:
        return raw  # nothing to drop (the usual call): no copy; later stages build their own
    props = tool.input_schema.get("properties") or {}
    required = set(tool.required)
    return {name: value for name, value in raw.items()
            if not (value is None and name in props and name not in required
                    and not takes_null(props[name]))}


def takes_null(prop: Any) -> bool:
    """Whether a parameter's schema accepts `null` as a value (its type, const, enum or an
    alternative says so, or it constrains nothing)."""
    if not isinstance(prop, dict) or not prop or ("default" in prop and prop["default"] is None):
        return True  # an unconstrained schema (or a null default) accepts null as a value
    kind = prop.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if prop.get("const", 0) is None or None in (prop.get("enum") or ()):
        return True
    return any(takes_null(alt) for key in ("anyOf", "oneOf") for alt in prop.get(key) or ())
