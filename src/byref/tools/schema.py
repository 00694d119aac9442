"""Input schemas: built from type hints (msgspec), and rewritten so a property may be a `$ref`.

The law: the `$ref` alternative is defined once per schema (`$defs`, `REF_DEF`) and each
property that may carry data names it by a bare pointer (`anyOf: [original, {"$ref":
"#/$defs/ref"}]`), so a declaration costs close to the server's own; a boolean or a choice from a
list (`enum`, `const`) is never data worth a ref and is left as it is. Never at the root (the
Anthropic API rejects a root-level anyOf; a pointer with siblings is refused by OpenAI's strict
mode). A rewritten schema is cached (by its `Tool`, for the identity of the original and the kept
names) so declarations are byte-identical turn after turn and the provider's prefix cache keeps
hitting; a cache lives and dies with its tool, so rebuilt toolboxes leave nothing behind.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
from collections.abc import Callable
from typing import Any, get_type_hints

import msgspec

from byref.errors import InvalidType, InvalidValue
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
            raise InvalidType(
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


REF_DEF = "ref"
"""The name of the `$ref` alternative under a rewritten schema's `$defs` (another when taken)."""


def rewrite_schema(original: dict[str, Any], keep: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every top-level property that may carry data becomes `anyOf: [original, pointer]`, the
    pointer naming the one `$defs` entry for a ref (properties in `keep` left as they are)."""
    if original.get("type") != "object":
        raise InvalidValue(
            f"A tool's input schema must be a JSON object schema (type 'object'), got "
            f"{original.get('type')!r}."
        )
    defs = original.get("$defs")
    defs = defs if isinstance(defs, dict) else {}
    name = _def_name(defs)
    pointer = {"$ref": f"#/$defs/{name}"}
    properties: dict[str, Any] = {}
    for key, prop in (original.get("properties") or {}).items():
        properties[key] = prop if key in keep else _with_ref(prop, pointer)
    out = dict(original)
    using = [key for key, prop in properties.items() if _names(prop, pointer, MODEL_REF_SCHEMA)]
    # One use holds the ref schema inline (cheaper than $defs), several share the definition.
    shared = len(using) > 1
    for key in using:
        properties[key] = _use(properties[key], pointer, pointer if shared else MODEL_REF_SCHEMA)
    if shared:
        out["$defs"] = {**defs, name: MODEL_REF_SCHEMA}
    out["properties"] = properties
    return out


def _def_name(defs: dict[str, Any]) -> str:
    name, n = REF_DEF, 1
    while name in defs and defs[name] != MODEL_REF_SCHEMA:
        name, n = f"{REF_DEF}_{n}", n + 1
    return name


def _with_ref(prop: Any, pointer: dict[str, str]) -> Any:
    """`prop` accepting a ref by `pointer` (a copy of the ref schema becomes the pointer)."""
    if not isinstance(prop, dict) or _names(prop, pointer) or _bounded(prop):
        return prop
    if prop == MODEL_REF_SCHEMA:
        return pointer
    alternatives = list(prop["anyOf"]) if set(prop) == {"anyOf"} else [_unmirrored(prop)]
    alternatives = [pointer if a == MODEL_REF_SCHEMA else a for a in alternatives]
    return {"anyOf": alternatives if pointer in alternatives else [*alternatives, pointer]}


def _names(prop: Any, *forms: dict[str, Any]) -> bool:
    """Whether `prop` is, or offers as an alternative, one of `forms`."""
    if not isinstance(prop, dict):
        return False
    alternatives = prop.get("anyOf")
    return any(prop == form or (isinstance(alternatives, list) and form in alternatives)
               for form in forms)


def _use(prop: dict[str, Any], pointer: dict[str, str], form: dict[str, Any]) -> dict[str, Any]:
    """`prop` with its ref alternative (inline or by `pointer`) written as `form`."""
    refs = (pointer, MODEL_REF_SCHEMA)
    if prop in refs:
        return form
    return {**prop, "anyOf": [form if a in refs else a for a in prop["anyOf"]]}


def _bounded(prop: dict[str, Any]) -> bool:
    """A boolean or a choice from a list: a few characters, copied exactly, never a ref's data."""
    if "enum" in prop or "const" in prop:
        return True
    kind = prop.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if kinds <= {"boolean", "null"} and "boolean" in kinds:
        return True
    alternatives = prop.get("anyOf")
    return (isinstance(alternatives, list) and bool(alternatives)
            and all(isinstance(a, dict) and (_bounded(a) or a.get("type") == "null")
                    for a in alternatives)
            and any(isinstance(a, dict) and _bounded(a) for a in alternatives))


def _unmirrored(prop: dict[str, Any]) -> dict[str, Any]:
    """`prop` without MCP's `x-mcp-header` (2026-07-28): a value that may be a `$ref` cannot be
    mirrored into an HTTP header, and clients drop a tool that annotates a property inside an
    `anyOf`. The tool's own schema keeps it: its server is sent the resolved value, and the
    header."""
    if MCP_HEADER not in prop:
        return prop
    return {key: value for key, value in prop.items() if key != MCP_HEADER}
