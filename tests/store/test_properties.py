"""Property tests: random put/get/head/delete/list sequences across two scopes, against every
adapter, compared with a plain model of the store. Zero divergences, zero cross-scope reads."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from byref.store import PutOptions, Scope, open_store
from byref.store.kit import decode_cursor, encode_cursor
from byref.store.port import ArtifactMeta

ADAPTERS = ["memory", "file", "sqlite", "postgres", "s3"]
EXAMPLES = {"memory": 60, "file": 40, "sqlite": 40, "postgres": 25, "s3": 15}

scope_index = st.integers(0, 1)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), scope_index, st.binary(max_size=64), st.sampled_from("ab")),
        st.tuples(st.sampled_from(["get", "head", "delete"]), scope_index, st.integers(0, 30)),
        st.tuples(st.just("list"), scope_index, st.sampled_from([None, "a", "b"]),
                  st.sampled_from([None, 1, 2, 5])),
    ),
    max_size=25,
)


@dataclass
class Model:
    owner: dict[str, int] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    kind: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # every ref ever minted, oldest first

    def live(self, who: int, kind: str | None) -> list[str]:
        return [r for r in reversed(self.order) if self.owner.get(r) == who
                and (kind is None or self.kind[r] == kind)]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_store_matches_its_model(adapter: str, make_url: Callable[[str], str]) -> None:
    store = open_store(make_url(adapter))

    @settings(max_examples=EXAMPLES[adapter], deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(ops)
    def run(sequence: list[tuple]) -> None:  # type: ignore[type-arg]
        token = secrets.token_hex(6)
        scopes = [Scope(f"prop-{token}", "p", "c"), Scope(f"prop-{token}", "P", "c")]
        model = Model()
        for op in sequence:
            if op[0] == "put":
                _, who, data, kind = op
                meta = store.put(scopes[who], data, PutOptions(kind=kind))
                assert meta.ref not in model.order
                model.owner[meta.ref], model.data[meta.ref] = who, data
                model.kind[meta.ref] = kind
                model.order.append(meta.ref)
            elif op[0] == "list":
                _, who, kind, limit = op
                seen, cursor = [], None
                for _ in range(40):
                    page = store.list(scopes[who], kind, cursor=cursor, limit=limit)
                    seen += [m.ref for m in page]
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                assert seen == model.live(who, kind)
            else:
                name, who, index = op
                ref = model.order[index % len(model.order)] if model.order else "art_" + "0" * 22
                mine = model.owner.get(ref) == who
                if name == "get":
                    got = store.get(scopes[who], ref)
                    assert (got.data if got else None) == (model.data[ref] if mine else None)
                elif name == "head":
                    head = store.head(scopes[who], ref)
                    assert (head.ref if head else None) == (ref if mine else None)
                else:
                    assert store.delete(scopes[who], ref) is mine
                    if mine:
                        del model.owner[ref]

    try:
        run()
    finally:
        store.close()


@given(st.floats(allow_nan=False, allow_infinity=False), st.text(min_size=1, max_size=30))
def test_cursor_round_trips(created_at: float, ref: str) -> None:
    meta = ArtifactMeta(ref=ref, kind="k", media_type="m", bytes=0, created_at=created_at)
    assert decode_cursor(encode_cursor(meta)) == (created_at, ref)


@given(st.lists(st.binary(max_size=50), max_size=20), st.integers(1, 40))
def test_regroup_preserves_bytes_and_cuts_exact_pieces(chunks: list[bytes], size: int) -> None:
    from byref.store.kit import regroup

    pieces = list(regroup(chunks, size))
    assert b"".join(pieces) == b"".join(chunks)
    assert all(len(p) == size for p in pieces[:-1])
    assert all(0 < len(p) <= size for p in pieces)


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_distinct_scope_values_never_share_a_key(a: str, b: str) -> None:
    try:
        left, right = Scope(a, "p", "c"), Scope(b, "p", "c")
    except ValueError:
        return  # lone surrogates are refused at construction
    assert (left.key() == right.key()) == (a == b)
