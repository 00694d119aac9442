"""Input schemas: built from type hints (msgspec), and rewritten so any property may be a `$ref`.

The law: the `$ref` alternative is attached to every top-level property (`anyOf: [original,
$ref]`), never at the root (the Anthropic API rejects a root-level anyOf); a rewritten schema is
cached (by its `Tool`, for the identity of the original and the kept names) so declarations are
byte-identical turn after turn and the provider's prefix cache keeps hitting; a cache lives and
dies with its tool, so rebuilt toolboxes leave nothing behind.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec

from byref.errors import InvalidValue
from byref.refs import MODEL_REF_SCHEMA, Ref

MCP_HEADER = "x-mcp-header"
"""The 2026-07-28 annotation naming a property whose value an HTTP request also carries as a
header."""


def is_ref_annotation(annotation: Any) -> bool:
    """Whether a parameter annotation is `Ref`."""
    return annotation is Ref or annotation == Ref


def schema_from_signature(fn: Callable[..., Any], lazy: frozenset[str]) -> dict[str, Any]:
    """A JSON Schema object for `fn`'s keyword parameters, from their type hints."""
    hints = get_type_hints(fn)
    signature = inspect.signature(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name == "ctx":
            continue
        if name not in hints:
            raise TypeError(
                f"Tool parameter {name!r} of {fn.__name__!r} needs a type hint to build its schema."
            )
        annotation = hints[name]
        if is_ref_annotation(annotation):
            prop: dict[str, Any] = copy.deepcopy(MODEL_REF_SCHEMA)
        else:
            (prop,), components = msgspec.json.schema_components(
                [annotation], ref_template="#/$defs/{name}"
            )
            defs.update(components)
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif param.default is not None:
            with contextlib.suppress(TypeError):
                prop = {**prop, "default": msgspec.to_builtins(param.default)}
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    if defs:
        schema["$defs"] = defs
    return schema


class SchemaCache:
    """Rewritten schemas keyed by the identity of the original and `keep` (holding the
    original, so its id stays valid). One per `Tool`: it is released with the tool."""

    def __init__(self) -> None:
        self._cache: dict[tuple[int, frozenset[str]], tuple[dict[str, Any], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def rewrite(
        self, original: dict[str, Any], keep: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """`original` rewritten to accept `$ref` arguments (properties in `keep` left as they
        are), cached."""
        key = (id(original), keep)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] is original:
                return hit[1]
            rewritten = rewrite_schema(original, keep)
            self._cache[key] = (original, rewritten)
            return rewritten

    def __len__(self) -> int:
        return len(self._cache)


def rewrite_schema(original: dict[str, Any], keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every top-level property becomes `anyOf: [original, $ref]` (except those in `keep`)."""
    if original.get("type") != "object":
        raise InvalidValue(
            f"A tool's input schema must be a JSON object schema (type 'object'), got "
            f"{original.get('type')!r}."
        )
    out = dict(original)
    properties = {}
    for name, prop in (original.get("properties") or {}).items():
        if name in keep or _accepts_ref_already(prop):
            properties[name] = prop
            continue
        alternatives = list(prop["anyOf"]) if set(prop) == {"anyOf"} else [_unmirrored(prop)]
        properties[name] = {"anyOf": [*alternatives, MODEL_REF_SCHEMA]}
    out["properties"] = properties
    return out


def _unmirrored(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` without MCP's `x-mcp-header` (2026-07-28): a value that may be a `$ref` cannot be
    mirrored into an HTTP header, and clients drop a tool that annotates a property inside an
    `anyOf`. The tool's own schema keeps it: its server is sent the resolved value, and the
    header."""
    if MCP_HEADER not in prop:
        return prop
    return {key: value for key, value in prop.items() if key != MCP_HEADER}


def _accepts_ref_already(prop: dict[str, Any]) -> bool:
    return prop == MODEL_REF_SCHEMA or MODEL_REF_SCHEMA in prop.get("anyOf", [])
