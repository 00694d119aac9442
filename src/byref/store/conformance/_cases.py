"""The cases of the conformance battery, each carrying the one law it holds.

Owns the laws themselves (the runner, harness and report live in `runner`). The law of this
module: a case raises to fail, uses only the scopes its kit hands it, and reaches beyond the five
verbs only through a named hook, so a missing hook is a visible failure rather than a silent skip.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from byref.battery import check, equal, raises
from byref.errors import DeveloperError
from byref.refs import KEY_PATTERN
from byref.store.port import (
    ArtifactIntegrityError,
    ArtifactStore,
    ArtifactTooLargeError,
    PutOptions,
    Scope,
    can_get_stream,
    can_put_stream,
    mint_key,
)

CaseName = Literal[
    "round-trip", "payload-shapes", "large-payload", "refs-minted-not-derived",
    "ref-alone-opens-nothing", "look-alike-scopes-stay-apart", "one-absence",
    "expiry-stated-at-mint", "idempotent-delete", "list-pages-newest-first", "awkward-scope-values",
    "oversized-refused-before-write", "evictions-reported", "digest-on-the-ticket",
    "corrupt-refused-by-get", "damaged-bytes-refused-everywhere",
    "streamed-size-mismatch-refused", "streaming-round-trip",
    "streaming-members-never-faked", "interrupted-stream-leaves-nothing",
    "concurrent-puts-two-processes", "crash-mid-put-invisible",
]
Member = Literal["put_stream", "get_stream"]
Hook = Literal["advance_time", "corrupt", "rewrite", "bounded_store", "reopen"]


class HookMissing(DeveloperError):
    """A case needed a harness hook that was neither supplied nor declared."""


@dataclass(frozen=True)
class Case:
    name: CaseName
    law: str
    run: Callable[[Kit], None]
    needs: tuple[Member, ...] = ()


@dataclass
class Kit:
    """What a case is handed: the store, unique scopes, and the harness hooks (or None)."""

    store: ArtifactStore
    token: str
    large_bytes: int
    advance: Callable[[float], None] | None
    corrupt: Callable[[Scope, str], None] | None
    bounded: Callable[[int], ArtifactStore] | None
    reopen: Callable[[], ArtifactStore] | None
    missing: Callable[[Hook], str]
    rewrite: Callable[[Scope, str, bytes], None] | None = None

    def scope(self, label: str = "main") -> Scope:
        return Scope(f"conformance-{self.token}", "principal", label)

    def hook_advance(self) -> Callable[[float], None]:
        if self.advance is None:
            raise HookMissing(self.missing("advance_time"))
        return self.advance

    def hook_corrupt(self) -> Callable[[Scope, str], None]:
        if self.corrupt is None:
            raise HookMissing(self.missing("corrupt"))
        return self.corrupt

    def hook_rewrite(self) -> Callable[[Scope, str, bytes], None]:
        if self.rewrite is None:
            raise HookMissing(self.missing("rewrite"))
        return self.rewrite

    def hook_bounded(self) -> Callable[[int], ArtifactStore]:
        if self.bounded is None:
            raise HookMissing(self.missing("bounded_store"))
        return self.bounded

    def hook_reopen(self) -> Callable[[], ArtifactStore]:
        if self.reopen is None:
            raise HookMissing(self.missing("reopen"))
        return self.reopen


OPTS = PutOptions(kind="test/bytes", media_type="application/octet-stream")


def _refs(store: ArtifactStore, scope: Scope) -> list[str]:
    return [m.ref for m in store.list(scope)]


# -- the cases ----------------------------------------------------------------------------------
def round_trip(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    opts = PutOptions(kind="dataset/rows", media_type="application/json", label="Q3 sales",
                      parent_refs=(mint_key(),), metadata={"version": 3, "source": "crm"})
    data = b'[{"order": 1}]'
    meta = s.put(scope, data, opts)
    for got, want, what in [(meta.kind, opts.kind, "kind"), (meta.bytes, len(data), "bytes"),
                            (meta.media_type, opts.media_type, "mediaType"),
                            (meta.label, opts.label, "label"),
                            (meta.parent_refs, opts.parent_refs, "parentRefs"),
                            (meta.metadata, opts.metadata, "metadata")]:
        equal(got, want, f"put answered {what}")
    equal(s.head(scope, meta.ref), meta, "head after put")
    got = s.get(scope, meta.ref)
    check(got is not None, "get after put answered None")
    assert got is not None
    equal(got.data, data, "get bytes")
    equal(got.meta, meta, "get meta")
    equal(_refs(s, scope), [meta.ref], "list after one put")


def payload_shapes(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    shapes = {"empty": b"", "one byte": b"\x00", "every byte value": bytes(range(256)) * 3,
              "invalid utf-8": b"\xff\xfe\xc3(", "text": "naïve ☃\n".encode()}
    for what, data in shapes.items():
        meta = s.put(scope, data, OPTS)
        equal(meta.bytes, len(data), f"{what}: bytes")
        got = s.get(scope, meta.ref)
        equal(None if got is None else got.data, data, f"{what}: round trip")


def large_payload(kit: Kit) -> None:
    s, scope, n = kit.store, kit.scope(), kit.large_bytes
    data = os.urandom(n)
    meta = s.put(scope, data, OPTS)
    equal(meta.bytes, n, "large payload bytes")
    got = s.get(scope, meta.ref)
    check(got is not None, f"get of a {n:,}-byte payload answered None")
    assert got is not None
    equal(hashlib.sha256(got.data).hexdigest(), hashlib.sha256(data).hexdigest(),
          f"sha-256 of the {n:,}-byte payload read back")


def refs_minted(kit: Kit) -> None:
    s, a, b = kit.store, kit.scope("a"), kit.scope("b")
    data = b"same bytes"
    refs = [s.put(a, data, OPTS).ref, s.put(a, data, OPTS).ref, s.put(b, data, OPTS).ref]
    equal(len(set(refs)), 3, "distinct refs for the same bytes put three times")
    for ref in refs:
        check(re.fullmatch(KEY_PATTERN, ref) is not None,
              f"ref {ref!r} is not art_ + 22 base62 characters")
        check(hashlib.sha256(data).hexdigest()[:8].lower() not in ref.lower(),
              f"ref {ref!r} carries the payload digest")


def ref_alone(kit: Kit) -> None:
    s, mine, other = kit.store, kit.scope("owner"), Scope(f"stranger-{kit.token}", "x", "y")
    meta = s.put(mine, b"secret", OPTS)
    equal(s.head(other, meta.ref), None, "head under another scope")
    equal(s.get(other, meta.ref), None, "get under another scope")
    if can_get_stream(s):
        equal(s.get_stream(other, meta.ref), None, "get_stream under another scope")
    equal(s.delete(other, meta.ref), False, "delete under another scope")
    equal(list(s.list(other)), [], "list of another scope")
    equal(s.head(mine, meta.ref), meta, "owner still holds the artifact")


def _look_alikes(token: str) -> list[Scope]:
    t = f"la-{token}"
    e_nfc, e_nfd = unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")
    return [Scope(t, "Alice", "c"), Scope(t, "alice", "c"), Scope(t, "ALICE", "c"),
            Scope(t, "a/b", "c"), Scope(t, "a%2Fb", "c"), Scope(t, "a_b", "c"),
            Scope(t, "a\\b", "c"), Scope(t, "..", "c"), Scope(t, ".", "c"),
            Scope(t, e_nfc, "c"), Scope(t, e_nfd, "c"), Scope(t, "x ", "c"), Scope(t, "x", "c"),
            Scope(t, "a/b", "c/d"), Scope(t, "a", "b/c/d"), Scope(t + "/a", "b", "c/d")]


def look_alike_scopes(kit: Kit) -> None:
    s = kit.store
    scopes = _look_alikes(kit.token)
    refs = {scope: s.put(scope, repr(scope).encode(), OPTS).ref for scope in scopes}
    for scope, ref in refs.items():
        equal(_refs(s, scope), [ref], f"list of {scope!r}")
        for other, other_ref in refs.items():
            if other != scope:
                equal(s.head(scope, other_ref), None, f"{scope!r} reading {other!r}'s ref")


def one_absence(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    gone = s.put(scope, b"deleted soon", OPTS)
    s.delete(scope, gone.ref)
    elsewhere = s.put(kit.scope("elsewhere"), b"not yours", OPTS)
    asks = {"never stored": mint_key(), "deleted": gone.ref, "other scope": elsewhere.ref,
            "path traversal": "../../etc/passwd", "empty": "", "malformed": "art_" + "%2F" * 8}
    for what, ref in asks.items():
        equal(s.head(scope, ref), None, f"head of a {what} ref")
        equal(s.get(scope, ref), None, f"get of a {what} ref")
        if can_get_stream(s):
            equal(s.get_stream(scope, ref), None, f"get_stream of a {what} ref")


def expiry_at_mint(kit: Kit) -> None:
    s, scope, advance = kit.store, kit.scope(), kit.hook_advance()
    meta = s.put(scope, b"short-lived", PutOptions(kind="test/bytes", ttl=60))
    check(meta.expires_at is not None and abs(meta.expires_at - meta.created_at - 60) < 1e-3,
          f"expiresAt stated at mint should be createdAt + 60, got {meta.expires_at!r}")
    forever = s.put(scope, b"no ttl", OPTS)
    equal(s.head(scope, meta.ref), meta, "head before expiry")
    advance(30)
    check(s.get(scope, meta.ref) is not None, "artifact vanished before its expiry")
    advance(31)
    equal(s.head(scope, meta.ref), None, "head after expiry")
    equal(s.get(scope, meta.ref), None, "get after expiry")
    equal(_refs(s, scope), [forever.ref], "list after expiry")


def idempotent_delete(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    meta = s.put(scope, b"x", OPTS)
    equal(s.delete(scope, meta.ref), True, "first delete")
    equal(s.delete(scope, meta.ref), False, "second delete")
    equal(s.delete(scope, mint_key()), False, "delete of a never-stored ref")
    equal(s.get(scope, meta.ref), None, "get after delete")


def list_paging(kit: Kit) -> None:
    s, scope = kit.store, kit.scope()
    equal((list(s.list(scope)), s.list(scope).next_cursor), ([], None), "list of an empty scope")
    refs = [s.put(scope, b"%d" % i, PutOptions(kind="even" if i % 2 == 0 else "odd")).ref
            for i in range(7)]
    seen, cursor, pages = [], None, 0
    while True:
        page = s.list(scope, limit=3, cursor=cursor)
        check(len(page) <= 3, f"a page of limit 3 held {len(page)} items")
        seen += [m.ref for m in page]
        pages += 1
        cursor = page.next_cursor
        if cursor is None or pages > 5:
            break
    equal(seen, refs[::-1], "pages joined, newest first")
    equal(pages, 3, "pages for 7 items at 3 per page")
    evens = s.list(scope, kind="even", limit=2)
    rest = s.list(scope, kind="even", limit=2, cursor=evens.next_cursor)
    equal([m.ref for m in [*evens, *rest]], refs[::-2], "kind-filtered pages")
    equal(rest.next_cursor, None, "cursor after the last page")
    raises(ValueError, lambda: s.list(scope, cursor="not a cursor"), "a forged cursor")
    raises(ValueError, lambda: s.list(scope, limit=0), "limit=0")


AWKWARD = ["../../etc", "a/b\\c", "%2F..%2F", "CON", "nul", "con.txt", " ", "\x00", "line\nbreak",
           "🙂", "\u202eevil", "*?<>|:", "x" * 1000, "art_", "' OR 1=1 --", "$(rm -rf)"]


def awkward_scopes(kit: Kit) -> None:
    s, plain = kit.store, kit.scope("plain")
    for value in AWKWARD:
        scope = Scope(f"aw-{kit.token}", value, value)
        meta = s.put(scope, value.encode(), OPTS)
        got = s.get(scope, meta.ref)
        equal(None if got is None else got.data, value.encode(), f"round trip under {value!r}")
        equal(_refs(s, scope), [meta.ref], f"list under {value!r}")
    equal(_refs(s, plain), [], "a plain sibling scope sees nothing")


def oversized(kit: Kit) -> None:
    store, scope = kit.hook_bounded()(1000), kit.scope()
    kept = store.put(scope, b"k" * 400, OPTS)
    raises(ArtifactTooLargeError, lambda: store.put(scope, b"x" * 1001, OPTS), "put over the cap")
    if can_put_stream(store):
        pulled: list[int] = []

        def chunks() -> Iterator[bytes]:
            pulled.append(1)
            yield b"x" * 1001

        raises(ArtifactTooLargeError, lambda: store.put_stream(scope, chunks(), 1001, OPTS),
               "streamed put declaring more than the cap")
        equal(pulled, [], "chunks pulled before refusing an oversized declaration")
    equal(_refs(store, scope), [kept.ref], "list after the refusals")


def evictions(kit: Kit) -> None:
    store, scope = kit.hook_bounded()(1000), kit.scope()
    a, b = store.put(scope, b"a" * 400, OPTS), store.put(scope, b"b" * 400, OPTS)
    equal(b.evicted, (), "evictions reported by a put that fit")
    c = store.put(scope, b"c" * 400, OPTS)
    equal(c.evicted, (a.ref,), "evictions reported by the put that crossed the ceiling")
    equal(store.head(scope, a.ref), None, "head of the evicted artifact")
    equal(_refs(store, scope), [c.ref, b.ref], "list after eviction")


def digest_on_ticket(kit: Kit) -> None:
    s, scope, data = kit.store, kit.scope(), b"integrity matters"
    meta = s.put(scope, data, PutOptions(kind="test/bytes", digest=True))
    equal(meta.digest, "sha256:" + hashlib.sha256(data).hexdigest(), "digest at put")
    equal(s.head(scope, meta.ref), meta, "head carries the digest")
    equal(s.put(scope, data, OPTS).digest, None, "digest when not asked for")


def corrupt_refused(kit: Kit) -> None:
    s, scope, corrupt = kit.store, kit.scope(), kit.hook_corrupt()
    meta = s.put(scope, b"0123456789" * 100, PutOptions(kind="test/bytes", digest=True))
    corrupt(scope, meta.ref)
    raises(ArtifactIntegrityError, lambda: s.get(scope, meta.ref), "get of damaged bytes")
    if can_get_stream(s):
        streamed = s.get_stream(scope, meta.ref)
        check(streamed is not None, "get_stream of damaged bytes answered None")
        assert streamed is not None
        raises(ArtifactIntegrityError, lambda: b"".join(streamed.chunks),
               "get_stream of damaged bytes, read to the end")


BASIC_CASES: tuple[Case, ...] = (
    Case("round-trip", "What put stores, head describes and get returns, byte for byte, with "
         "every field of the ticket intact.", round_trip),
    Case("payload-shapes", "Empty, binary and non-UTF-8 payloads round-trip unchanged.",
         payload_shapes),
    Case("large-payload", "A 50 MB payload round-trips whole.", large_payload),
    Case("refs-minted-not-derived", "A ref is minted (art_ + 22 random base62), never derived "
         "from content: the same bytes stored twice are two artifacts.", refs_minted),
    Case("ref-alone-opens-nothing", "A ref opens nothing under any other scope; possession of a "
         "ref is not an entitlement.", ref_alone),
    Case("look-alike-scopes-stay-apart", "Scopes differing only in case, separators, `..`, "
         "`%2F` or unicode normalization never share storage.", look_alike_scopes),
    Case("one-absence", "Missing, deleted, other-scope and malformed refs all answer None, "
         "never an error that tells them apart.", one_absence),
    Case("expiry-stated-at-mint", "Expiry is stated on the ticket at mint and honoured: after "
         "it, the artifact answers None everywhere.", expiry_at_mint),
    Case("idempotent-delete", "delete answers True once, then False, and never raises.",
         idempotent_delete),
    Case("list-pages-newest-first", "list pages newest first with a cursor; pages join to the "
         "whole list with no gap or repeat, also when filtered by kind.", list_paging),
    Case("awkward-scope-values", "Scope values with separators, dots, NUL, control characters, "
         "reserved names or 1,000 characters store and read back in isolation.", awkward_scopes),
    Case("oversized-refused-before-write", "A payload larger than the scope's whole budget is "
         "refused before anything is written, and nothing already stored is lost.", oversized),
    Case("evictions-reported", "Retention evicts oldest first and the put that evicted says "
         "which refs it evicted.", evictions),
    Case("digest-on-the-ticket", "An opt-in sha-256 digest is computed at put and rides on the "
         "ticket; it is never the key.", digest_on_ticket),
    Case("corrupt-refused-by-get", "get and get_stream refuse damaged bytes with "
         "ArtifactIntegrityError rather than handing them back as whole.", corrupt_refused),
)
