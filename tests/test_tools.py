"""Tools: schemas from type hints, `$ref` rewriting per property, byte-stable declarations."""

from __future__ import annotations

from typing import Any, Literal

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


def test_rewrite_puts_ref_on_every_property_never_the_root() -> None:
    declared = make_report.declaration()["input_schema"]
    assert "anyOf" not in declared and declared["type"] == "object"
    for name, prop in declared["properties"].items():
        assert prop["anyOf"][-1] == MODEL_REF_SCHEMA, name
        assert prop["anyOf"][0] == make_report.input_schema["properties"][name]


def test_a_property_that_may_be_a_ref_is_not_mirrored_into_a_header() -> None:
    # 2026-07-28 clients drop a tool whose `x-mcp-header` sits inside an anyOf, and a $ref
    # cannot be a header value: the rewritten property leaves it out, the original keeps it.
    region = {"type": "string", "description": "where", "x-mcp-header": "Region"}
    original = {"type": "object", "properties": {"region": region, "n": {"type": "integer"}}}
    rewritten = rewrite_schema(original)
    assert rewritten["properties"]["region"] == {"anyOf": [
        {"type": "string", "description": "where"}, MODEL_REF_SCHEMA]}
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
    declared = query_json.declaration()["input_schema"]["properties"]
    assert declared["source"] == MODEL_REF_SCHEMA
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
