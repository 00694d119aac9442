"""The extension's vocabulary: who declared it, what a schema that accepts refs looks like, what
an announcement names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from byref.extension.protocol import (
    CLIENT_CAPABILITIES_META_KEY,
    IDENTIFIER,
    accepts_refs,
    announced,
    blob_key,
    declared,
    entry,
)
from byref.extension.server import accepting
from byref.store import ArtifactMeta


def test_a_request_declares_per_request_else_the_connection_does() -> None:
    listed = {"extensions": {IDENTIFIER: {}}}
    assert declared({CLIENT_CAPABILITIES_META_KEY: listed}, None)
    # A 2026-07-28 request's own capabilities win over what the connection said before.
    assert not declared({CLIENT_CAPABILITIES_META_KEY: {}}, listed)
    assert declared(None, {"experimental": {IDENTIFIER: {}}})
    assert not declared(None, None)
    assert not declared({}, {"extensions": {"other/ext": {}}})


def test_a_rewritten_schema_accepts_refs_and_a_plain_one_does_not() -> None:
    schema = {"type": "object", "properties": {"data": {"type": "string"}}}
    assert not accepts_refs(schema["properties"]["data"], schema)
    rewritten = accepting(schema)
    assert accepts_refs(rewritten["properties"]["data"], rewritten)
    assert schema["properties"]["data"] == {"type": "string"}  # the original untouched


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12))
def test_reading_announcements_and_schemas_never_raises(value: object) -> None:
    assert isinstance(announced(value), list)
    assert isinstance(accepts_refs(value, value), bool)
    assert blob_key(value) is None or isinstance(blob_key(value), str)


def test_an_entry_carries_the_record_hex_digest_and_expiry() -> None:
    meta = ArtifactMeta(ref="art_" + "a" * 22, kind="k", media_type="text/plain", bytes=5,
                        created_at=0.0, expires_at=86_400.0, digest="sha256:" + "0" * 64)
    got = entry(meta, block=1, shape=None)
    assert got["sha256"] == "0" * 64 and got["expiresAt"] == "1970-01-02T00:00:00Z"
    assert blob_key(got["ref"]) == meta.ref and got["block"] == 1
    assert announced({IDENTIFIER: {"refs": [got]}}) == [got]
