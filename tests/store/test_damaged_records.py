"""One damaged record does not break its scope: `list` and bounded puts skip it and report it to
the operator; `head` / `get` of that ref still raise `ArtifactIntegrityError` naming where it is."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from byref.events import Emitter, MemorySink
from byref.store import (
    ArtifactIntegrityError,
    ArtifactStore,
    PutOptions,
    Retention,
    Scope,
    mint_key,
    open_store,
)

OPTS = PutOptions(kind="test/bytes")
GARBAGE = b"{not json"


def _damage(store: Any, scope: Scope, ref: str) -> None:
    """Overwrite the record (not the payload) beside the port."""
    if hasattr(store, "root"):
        next(Path(store.root).rglob(f"{ref}.json")).write_bytes(GARBAGE)
    elif hasattr(store, "_write"):  # the SQL adapters
        with store._write() as tx:
            tx.count("UPDATE {a} SET meta = ? WHERE ref = ?", (GARBAGE.decode(), ref))
    else:
        store._obs.put(store._store, store._json(scope, ref), GARBAGE, use_multipart=False)


def _open(url: str, sink: MemorySink, **retention: int) -> ArtifactStore:
    return open_store(url, emit=Emitter(sink), retention=Retention(**retention) if retention
                      else None)


def _damage_events(sink: MemorySink) -> list[dict[str, Any]]:
    return [e.data for e in sink.named("refused") if e.data.get("reason") == "damaged-record"]


ADAPTERS = ["file", "sqlite", "postgres", "s3"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_list_skips_a_damaged_record_and_reports_it(
    adapter: str, make_url: Callable[[str], str]
) -> None:
    sink = MemorySink()
    store = _open(make_url(adapter), sink)
    scope = Scope(f"dmg-{mint_key()}")
    refs = [store.put(scope, b"%d" % i, OPTS).ref for i in range(4)]
    bad = refs[2]
    _damage(store, scope, bad)
    good = [r for r in refs[::-1] if r != bad]
    assert [m.ref for m in store.list(scope)] == good
    seen, cursor = [], None
    for _ in range(10):  # one item a page: paging walks past the damaged row
        page = store.list(scope, limit=1, cursor=cursor)
        seen += [m.ref for m in page]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == good
    events = _damage_events(sink)
    assert events and all(e["ref"] == bad and e["scope"] == str(scope) for e in events)
    assert events[0]["cause"] == "damaged"
    assert events[0]["detail"].startswith("The artifact record at ")
    assert "is damaged (" in events[0]["detail"]
    with pytest.raises(ArtifactIntegrityError, match=r"^The artifact record at '.*' is damaged "
                       r"\(.*\); delete that artifact or restore it from a backup.$"):
        store.head(scope, bad)
    with pytest.raises(ArtifactIntegrityError, match=r"is damaged"):
        store.get(scope, bad)
    store.close()


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_bounded_puts_keep_working_beside_a_damaged_record(
    adapter: str, make_url: Callable[[str], str]
) -> None:
    sink = MemorySink()
    store = _open(make_url(adapter), sink, max_count_per_scope=3)
    scope = Scope(f"dmg-{mint_key()}")
    first, bad = store.put(scope, b"a", OPTS), store.put(scope, b"b", OPTS)
    _damage(store, scope, bad.ref)
    third = store.put(scope, b"c", OPTS)
    assert third.evicted == ()  # the damaged one is not counted
    fourth = store.put(scope, b"d", OPTS)
    assert fourth.evicted == ()
    fifth = store.put(scope, b"e", OPTS)
    assert fifth.evicted == (first.ref,)
    assert [m.ref for m in store.list(scope)] == [fifth.ref, fourth.ref, third.ref]
    assert {e["ref"] for e in _damage_events(sink)} == {bad.ref}
    store.close()


def test_sql_record_names_its_row(make_url: Callable[[str], str]) -> None:
    store = open_store(make_url("sqlite"))
    scope = Scope("t")
    meta = store.put(scope, b"x", OPTS)
    _damage(store, scope, meta.ref)
    with pytest.raises(ArtifactIntegrityError, match=rf"^The artifact record at 'the artifacts "
                       rf"table, row {meta.ref}' is damaged"):
        store.head(scope, meta.ref)
    store.close()
