"""The ref parser: what the model may write, what it may not, and what it is told."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from byref.refs import (
    Blob,
    Clause,
    JsonPointer,
    JsonQuery,
    MessageRef,
    RefRefusal,
    envelope,
    is_recipe,
    parse_model_envelope,
    parse_model_ref,
    parse_server_ref,
)

KEY = "art_" + "a" * 22


def test_accepts_message_and_blob() -> None:
    parsed = parse_model_ref({"type": "Message", "seq": 4, "part": 0, "field": "value"})
    assert parsed == MessageRef(part=0, seq=4, field="value")
    assert parse_model_ref({"type": "Message", "part": 2}) == MessageRef(part=2)
    assert parse_model_ref({"type": "Blob", "key": KEY}) == Blob(key=KEY)
    nested = {"type": "Blob", "source": {"type": "Message", "seq": 1, "part": 0}}
    assert parse_model_ref(nested) == Blob(source=MessageRef(part=0, seq=1))


@pytest.mark.parametrize("kind", ["JsonPointer", "JsonQuery"])
def test_refuses_recipes_from_the_model(kind: str) -> None:
    body = {"type": kind, "source": {"type": "Blob", "key": KEY}, "path": "/items"}
    with pytest.raises(RefRefusal) as err:
        parse_model_ref(body)
    assert str(err.value).startswith(
        f"References of type {kind!r} are built by the server and cannot be written."
    )
    # A recipe hidden under a Blob source is refused just the same.
    with pytest.raises(RefRefusal):
        parse_model_ref({"type": "Blob", "source": body})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"type": "File", "key": KEY}, "Unknown reference type 'File'"),
        ({"type": "Message", "part": 0, "extra": 1}, "unexpected key(s) 'extra'"),
        ({"type": "Message", "part": -1}, "'part' must be a non-negative integer, got -1."),
        ({"type": "Message", "part": 1.5}, "'part' must be a non-negative integer, got 1.5."),
        ({"type": "Message", "part": True}, "'part' must be a non-negative integer, got True."),
        ({"type": "Message", "part": 0, "seq": "4"}, "'seq' must be a non-negative integer"),
        ({"type": "Message", "part": 0, "field": 3}, "'field' must be a dot-path string"),
        ({"type": "Message", "part": 0, "field": "a..b"}, "'field' must be a dot-path string"),
        ({"type": "Message"}, "needs 'part'"),
        ({"type": "Blob", "key": "secret.txt"}, "A 'Blob' key looks like 'art_'"),
        ({"type": "Blob"}, "needs exactly one of 'key'"),
        ("Message", "written as a string must be a handle copied from a result's ref line"),
        ("r1234567890", "written as a string must be a handle"),  # ten digits: not one
        ("[ref r12]", 'write the handle alone, exactly as the ref line shows it inside [ref …]: '
                      '{"$ref": "r12"}'),
    ],
)
def test_refusals_name_the_problem(body: Any, message: str) -> None:
    with pytest.raises(RefRefusal) as err:
        parse_model_ref(body)
    assert message in str(err.value)


def test_nesting_past_the_validation_cap_is_refused() -> None:
    body: dict[str, Any] = {"type": "Message", "part": 0}
    for _ in range(8):
        body = {"type": "Blob", "source": body}
    with pytest.raises(RefRefusal, match="nests more than 8 levels deep"):
        parse_model_ref(body)
    assert parse_model_ref(body, cap=9) is not None


def test_envelope_must_be_the_only_key() -> None:
    with pytest.raises(RefRefusal, match="single key '\\$ref'"):
        parse_model_envelope({"$ref": {"type": "Message", "part": 0}, "note": "x"})


def test_server_round_trip_of_recipes() -> None:
    recipe = JsonQuery(Blob(key=KEY), "/items", (Clause.equals("status", "open"),
                                                 Clause.containing("title", "login")))
    assert parse_server_ref(recipe.to_json()) == recipe
    pointer = JsonPointer(MessageRef(part=0, seq=3, field="value"), "/a/0")
    assert parse_server_ref(envelope(pointer)["$ref"]) == pointer
    assert is_recipe(recipe) and not is_recipe(Blob(key=KEY))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["type", "seq", "part", "field", "key", "source", "path",
                                       "filter", "$ref", "x"]), children, max_size=5),
    max_leaves=20,
)
ref_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["Message", "Blob", "JsonPointer", "JsonQuery", "Other"])},
    optional={"seq": json_values, "part": json_values, "field": json_values, "key": json_values,
              "source": json_values, "path": json_values, "filter": json_values},
)


def _contains_recipe(ref: Any) -> bool:
    if is_recipe(ref):
        return True
    return isinstance(ref, Blob) and ref.source is not None and _contains_recipe(ref.source)


@given(st.one_of(json_values, ref_like))
def test_parser_never_crashes_and_never_accepts_a_recipe(body: Any) -> None:
    try:
        ref = parse_model_ref(body)
    except RefRefusal:
        return
    assert isinstance(ref, MessageRef | Blob)
    assert not _contains_recipe(ref)


@given(st.one_of(json_values, ref_like))
def test_envelope_parser_only_raises_refusals(body: Any) -> None:
    with contextlib.suppress(RefRefusal):
        parse_model_envelope({"$ref": body})
