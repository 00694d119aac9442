"""Tools: schemas from type hints, `$ref` rewriting per property, byte-stable declarations."""

from __future__ import annotations

import copy
from typing import Any, Literal

import jsonschema
import msgspec
import pytest

from byref.refs import MODEL_REF_SCHEMA, Ref
from byref.tools import SchemaCache, Tool, ToolInputError, query_json, rewrite_schema, tool


@tool
def make_report(title: str, rows: list[dict[str, Any]], pages: int = 1,
                style: Literal["plain", "fancy"] = "plain") -> str:
    """Render rows.

    Second paragraph."""
    return f"{title}:{len(rows)}:{pages}:{style}"


def test_schema_from_type_hints() -> None:
    schema = make_report.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["title", "rows"]
    assert schema["properties"]["pages"] == {"type": "integer", "default": 1}
    assert sorted(schema["properties"]["style"]["enum"]) == ["fancy", "plain"]
    assert make_report.description == "Render rows.\n\nSecond paragraph."


POINTER = {"$ref": "#/$defs/ref"}
REF = {"$ref": {"type": "Message", "seq": 3, "part": 0, "field": "rows.0"}}


def test_rewrite_defines_the_ref_once_and_each_data_property_points_to_it() -> None:
    declared = make_report.declaration()["input_schema"]
    assert "anyOf" not in declared and declared["type"] == "object"
    assert declared["$defs"] == {"ref": MODEL_REF_SCHEMA}
    for name in ("title", "rows", "pages"):
        prop = declared["properties"][name]
        assert prop["anyOf"] == [make_report.input_schema["properties"][name], POINTER], name
    # A choice from a list is copied exactly and never large: no ref alternative.
    assert declared["properties"]["style"] == make_report.input_schema["properties"]["style"]


def test_rewritten_schema_validates_a_ref_and_a_plain_value() -> None:
    validator = make_report.declared_validator()
    plain = {"title": "t", "rows": [{"a": 1}], "pages": 2, "style": "fancy"}
    assert not list(validator.iter_errors(plain))
    for name in ("title", "rows", "pages"):
        assert not list(validator.iter_errors({**plain, name: REF})), name
    assert list(validator.iter_errors({**plain, "style": REF}))  # not a data parameter
    assert list(validator.iter_errors({**plain, "rows": {**REF, "x": 1}}))  # not a ref
    assert list(validator.iter_errors({**plain, "rows": "text"}))  # neither


def test_one_data_property_holds_the_ref_schema_inline() -> None:
    declared = rewrite_schema({"type": "object", "properties": {
        "path": {"type": "string"}, "recursive": {"type": "boolean"},
        "mode": {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]}}})
    assert "$defs" not in declared
    assert declared["properties"] == {
        "path": {"anyOf": [{"type": "string"}, MODEL_REF_SCHEMA]},
        "recursive": {"type": "boolean"},
        "mode": {"anyOf": [{"enum": ["a", "b"]}, {"type": "null"}]}}


@pytest.mark.parametrize("dialect", [None, "http://json-schema.org/draft-07/schema#",
                                     "https://json-schema.org/draft/2020-12/schema"])
def test_a_servers_own_definitions_and_pointers_are_kept(dialect: str | None) -> None:
    # pydantic and zod servers send $defs (one here even named 'ref') and point into them.
    original: dict[str, Any] = {
        "type": "object", **({"$schema": dialect} if dialect else {}),
        "properties": {"item": {"$ref": "#/$defs/ref"}, "note": {"type": "string"},
                       "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}},
        "required": ["item"],
        "$defs": {"ref": {"type": "object", "properties": {"id": {"type": "integer"}},
                          "required": ["id"]},
                  "Tag": {"type": "string", "maxLength": 3}}}
    declared = rewrite_schema(original)
    assert declared["$defs"]["ref"] == original["$defs"]["ref"]
    assert declared["$defs"]["ref_1"] == MODEL_REF_SCHEMA
    assert declared["properties"]["item"] == {"anyOf": [{"$ref": "#/$defs/ref"},
                                                        {"$ref": "#/$defs/ref_1"}]}
    validator = jsonschema.validators.validator_for(declared, jsonschema.Draft202012Validator)
    check = validator(declared)
    plain = {"item": {"id": 1}, "note": "n", "tags": ["abc"]}
    assert not list(check.iter_errors(plain))
    for name in plain:
        assert not list(check.iter_errors({**plain, name: REF})), name
    assert list(check.iter_errors({**plain, "tags": ["abcd"]}))  # their own rules still hold
    assert list(check.iter_errors({**plain, "item": {"id": "x"}}))
    assert rewrite_schema(declared) == declared  # rewriting is idempotent


def test_declarations_fit_what_providers_accept() -> None:
    # Anthropic: the root is an object schema with no combinator; OpenAI: a $ref has no
    # sibling keywords, points inside the schema, and the SDK's strict conversion keeps the
    # definition shared (it inlines a $ref only when siblings force it).
    from openai.lib._pydantic import _ensure_strict_json_schema

    declared = make_report.declaration()["input_schema"]
    assert declared["type"] == "object" and not {"anyOf", "oneOf", "allOf", "$ref"} & set(
        declared)

    def pointers(node: Any) -> list[dict[str, Any]]:
        if isinstance(node, list):
            return [p for item in node for p in pointers(item)]
        if not isinstance(node, dict):
            return []
        here = [node] if isinstance(node.get("$ref"), str) else []
        return here + [p for k, v in node.items() if k != "properties" for p in pointers(v)] + (
            [p for v in node.get("properties", {}).values() for p in pointers(v)])

    found = pointers(declared)
    assert found and all(p == POINTER for p in found)
    strict = _ensure_strict_json_schema(copy.deepcopy(declared), path=(), root={})
    assert pointers(strict) == found and "ref" in strict["$defs"]


def test_literal_parameters_are_declared_without_a_ref_and_refuse_one() -> None:
    @tool
    def page(source: str, limit: int = 10) -> str:
        return source[:limit]

    literal = Tool(name="page", description="d", fn=page.fn, input_schema=page.input_schema,
                   annotations=page.annotations, literal=frozenset({"limit"}))
    declared = literal.declaration()["input_schema"]["properties"]
    assert declared["limit"] == {"type": "integer", "default": 10}
    assert declared["source"] == {"anyOf": [{"type": "string"}, MODEL_REF_SCHEMA]}
    assert list(literal.declared_validator().iter_errors({"source": "s", "limit": REF}))
    with pytest.raises(ValueError, match="marks unknown parameter\\(s\\) literal: \\['x'\\]"):
        Tool(name="t", description="d", fn=page.fn, input_schema=page.input_schema,
             literal=frozenset({"x"}))


def test_a_property_that_may_be_a_ref_is_not_mirrored_into_a_header() -> None:
    # 2026-07-28 clients drop a tool whose `x-mcp-header` sits inside an anyOf, and a $ref
    # cannot be a header value: the rewritten property leaves it out, the original keeps it.
    region = {"type": "string", "description": "where", "x-mcp-header": "Region"}
    original = {"type": "object", "properties": {"region": region, "n": {"type": "integer"}}}
    rewritten = rewrite_schema(original)
    assert rewritten["properties"]["region"] == {"anyOf": [
        {"type": "string", "description": "where"}, {"$ref": "#/$defs/ref"}]}
    assert rewritten["$defs"]["ref"] == MODEL_REF_SCHEMA  # shared: `n` may be a ref too
    assert "x-mcp-header" not in str(rewritten)
    assert original["properties"]["region"]["x-mcp-header"] == "Region"
    kept = rewrite_schema(original, frozenset({"region"}))
    assert kept["properties"]["region"] is region  # not offered a $ref: nothing to take out


def test_declarations_are_identical_objects_and_bytes_across_turns() -> None:
    first, second = make_report.declaration(), make_report.declaration()
    assert first["input_schema"] is second["input_schema"]
    assert msgspec.json.encode(first) == msgspec.json.encode(second)


def test_cache_is_keyed_by_identity_not_equality() -> None:
    cache = SchemaCache()
    a = {"type": "object", "properties": {"x": {"type": "string"}}}
    b = {"type": "object", "properties": {"x": {"type": "string"}}}
    assert cache.rewrite(a) is cache.rewrite(a)
    assert cache.rewrite(a) is not cache.rewrite(b)


def test_cache_key_includes_kept_names() -> None:
    cache = SchemaCache()
    a = {"type": "object", "properties": {"x": {"type": "string"}}}
    assert "anyOf" in cache.rewrite(a)["properties"]["x"]
    assert cache.rewrite(a, frozenset({"x"}))["properties"]["x"] == {"type": "string"}


def test_schema_caches_belong_to_their_tool_and_are_released_with_it() -> None:
    import gc
    import weakref

    class Schema(dict[str, Any]):  # a dict that can be weakly referenced
        pass

    def build(i: int) -> Tool:
        return Tool(name=f"t{i}", description="d", fn=lambda x: x,
                    input_schema=Schema(type="object", properties={"x": {"type": "string"}}))

    tools = [build(i) for i in range(1_000)]
    for t in tools:
        t.declaration()
        t.declared_validator()
        t.plain_validator()
    refs = [weakref.ref(t.input_schema) for t in tools]
    del tools, t
    gc.collect()
    assert sum(r() is not None for r in refs) == 0  # nothing process-wide keeps them alive


def test_rewrite_refuses_non_object_root() -> None:
    with pytest.raises(ValueError, match="must be a JSON object schema \\(type 'object'\\), got "
                                         "'array'"):
        rewrite_schema({"type": "array"})


def test_lazy_ref_parameter_is_not_wrapped() -> None:
    declared = query_json.declaration()["input_schema"]
    # the ref schema itself, named by pointer since the other parameters share it
    assert declared["properties"]["source"] == POINTER
    assert declared["$defs"] == {"ref": MODEL_REF_SCHEMA}
    assert "source" in query_json.lazy


def test_convert_checks_and_converts() -> None:
    assert make_report.convert({"title": "t", "rows": [], "pages": 2}) == {
        "title": "t", "rows": [], "pages": 2}
    with pytest.raises(ToolInputError, match="Argument 'pages' of tool 'make_report' does not fit "
                                             "its schema: Expected `int`, got `str`"):
        make_report.convert({"title": "t", "rows": [], "pages": "two"})
    with pytest.raises(ToolInputError, match="Tool 'make_report' needs 'rows'"):
        make_report.convert({"title": "t"})
    with pytest.raises(ToolInputError, match="has no parameter\\(s\\) 'colour'"):
        make_report.convert({"title": "t", "rows": [], "colour": "red"})


def test_foreign_schema_tools_validate_with_jsonschema() -> None:
    foreign = Tool(name="create_issue", description="", fn=lambda **kw: kw, input_schema={
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"]})
    assert foreign.convert({"n": 3}) == {"n": 3}
    with pytest.raises(ToolInputError, match="at 'n': 0 is less than the minimum of 1"):
        foreign.convert({"n": 0})


def test_bad_tool_definitions_raise_for_the_developer() -> None:
    with pytest.raises(ValueError, match="Tool name 'bad name' must be letters"):
        Tool(name="bad name", description="", fn=lambda: None, input_schema={"type": "object"})

    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(TypeError, match="parameter 'x' of 'untyped' needs a type hint"):
        tool(untyped)

    def f(src: Ref) -> None: ...

    assert "src" in tool(f).lazy
