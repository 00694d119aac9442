"""The refs battery's core cases: each holds one law of docs/extensions/refs.md against a live
server.

Owns the cases of §1–§9 (`CORE_CASES`; the host methods' are `host_cases`) and what every case
needs (`Kit`: connections that declare the extension or not, a second owner's, the probe tools'
names, the large size, an HTTP GET with the target's credentials). The law: a case reads only
what the wire shows (the capabilities, the content blocks, `_meta`) and raises `CaseFailed`
saying what it saw; a case that needs what the target cannot give raises `NotApplicable` with
the reason.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal

from byref.battery import check, equal
from byref.errors import DeveloperError
from byref.extension.conformance.probe import probe_digest, probe_text
from byref.extension.protocol import IDENTIFIER, accepts_refs, announced, blob_key

CaseName = Literal[
    "advertised", "small-inline", "placed-announced", "resolves-exact", "absent-one-way",
    "absent-other-owner", "derived-refused", "near-envelope-refused", "fallback-core",
    "schema-accepts", "host-stat", "host-read-ranges", "host-upload", "host-absent",
    "host-download", "host-undeclared",
]


class NotApplicable(DeveloperError):
    """The target cannot be asked what the case needs (a probe tool, a second owner)."""


@dataclass(frozen=True)
class Reply:
    """A request's answer: its result, or its JSON-RPC error's code and message."""

    result: dict[str, Any] | None
    code: int | None = None
    message: str = ""


@dataclass(frozen=True)
class Session:
    """One open connection: call a tool, list tools, send any request, and what the server
    advertised."""

    call: Callable[[str, dict[str, Any]], Awaitable[Any]]
    list_tools: Callable[[], Awaitable[list[Any]]]
    capabilities: dict[str, Any]
    request: Callable[[str, dict[str, Any]], Awaitable[Reply]]


@dataclass(frozen=True)
class Kit:
    """What a case gets: connections (`open(declare=..., fresh=...)`: the run's shared one, or
    with `fresh` a new one as the other owner), the probe names and sizes, and `fetch(url,
    other)`, an HTTP GET as the target's owner or the other one (None over stdio)."""

    open: Callable[..., AbstractAsyncContextManager[Session]]
    emit: str
    digest: str
    large: int
    other_owner: bool
    """Whether a fresh connection is another owner (a fresh process over stdio, the second
    token over a URL)."""
    fetch: Callable[[str, bool], Awaitable[tuple[int, bytes]]] | None = None


@dataclass(frozen=True)
class Case:
    """One law and the check that holds a server to it."""

    name: CaseName
    law: str
    run: Callable[[Kit], Awaitable[None]]


def text_of(result: Any) -> str:
    """The text blocks of a `tools/call` result, joined by newlines."""
    return "\n".join(getattr(b, "text", "") for b in result.content
                     if getattr(b, "type", "") == "text")


def _meta(result: Any) -> dict[str, Any]:
    meta = getattr(result, "meta", None)
    return meta if isinstance(meta, dict) else {}


async def placed(s: Session, kit: Kit) -> tuple[Any, dict[str, Any]]:
    """Ask `emit` for a large result: the result and the one ref its `_meta` announced."""
    result = await s.call(kit.emit, {"size": kit.large})
    check(not result.is_error, f"{kit.emit}(size={kit.large}) answered an error: "
                               f"{text_of(result)[:200]!r}")
    refs = announced(_meta(result))
    check(len(refs) == 1, f"a {kit.large:,}-byte result announced {len(refs)} refs in "
                          f"_meta[{IDENTIFIER!r}], expected 1 (meta keys: {sorted(_meta(result))})")
    return result, refs[0]


async def _advertised(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        check(IDENTIFIER in s.capabilities,
              f"{IDENTIFIER!r} is not among the advertised extensions {sorted(s.capabilities)}")
        version = (s.capabilities[IDENTIFIER] or {}).get("version")
        check(isinstance(version, str), f"its settings carry no version: "
                                        f"{s.capabilities[IDENTIFIER]!r}")


async def _small_inline(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        result = await s.call(kit.emit, {"size": 64})
        text = text_of(result)
        check(probe_text(64) in text, f"a 64-byte result is not shown whole: {text[:200]!r}")
        equal(announced(_meta(result)), [], "stored refs announced for a 64-byte result")


async def _placed_announced(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        result, entry = await placed(s, kit)
        key = blob_key(entry.get("ref"))
        check(key is not None, f"the announced ref is not a Blob envelope: {entry.get('ref')!r}")
        assert key is not None
        equal(entry.get("bytes"), kit.large, "announced bytes")
        equal(entry.get("sha256"), probe_digest(kit.large), "announced sha256")
        check(isinstance(entry.get("mediaType"), str), f"no mediaType in {entry!r}")
        check("expiresAt" in entry, f"no expiresAt (null for none) in {entry!r}")
        text = text_of(result)
        check(key in text, f"the model-visible text does not show the announced key {key!r}")
        check(len(text) < kit.large // 4, f"the text shown is {len(text):,} characters for a "
                                           f"{kit.large:,}-byte result: it was not stored")


async def _resolves_exact(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        result = await s.call(kit.digest, {"data": entry["ref"]})
        got = text_of(result)
        check(not result.is_error, f"the ref was refused: {got[:300]!r}")
        check(probe_digest(kit.large) in got,
              f"the tool received other bytes: its digest {got[:80]!r}, the stored "
              f"{probe_digest(kit.large)!r}")


def absent_ref(key: str) -> dict[str, Any]:
    """A Blob ref to `key`."""
    return {"$ref": {"type": "Blob", "key": key}}


def fresh_key() -> str:
    """A well-formed key no server minted."""
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    return "art_" + "".join(secrets.choice(alphabet) for _ in range(22))


def _refused(result: Any, what: str) -> str:
    text = text_of(result)
    check(bool(result.is_error), f"{what} was not refused (isError false): {text[:200]!r}")
    check(re.fullmatch(r"[0-9a-f]{64}\s*(\[ref[: ].*)?", text.strip(), re.S) is None,
          f"{what}: the tool ran (its digest came back)")
    check(0 < len(text) <= 4_000, f"{what}: a refusal of {len(text):,} characters")
    return text


async def _absent_one_way(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        one, two = fresh_key(), fresh_key()
        first = _refused(await s.call(kit.digest, {"data": absent_ref(one)}), "an unknown key")
        second = _refused(await s.call(kit.digest, {"data": absent_ref(two)}), "an unknown key")
        equal(masked(second, two), masked(first, one), "two unknown keys' refusals")


def masked(text: str, key: str) -> str:
    """`text` with `key` (and a trailing ref line) taken out: what two refusals share."""
    return re.sub(r"\[ref[: ].*\]", "", text.replace(key, "<key>")).strip()


async def _absent_other_owner(kit: Kit) -> None:
    if not kit.other_owner:
        raise NotApplicable("a second owner is not reachable (over a URL, pass a second token)")
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
    key = blob_key(entry["ref"])
    assert key is not None
    never = fresh_key()
    async with kit.open(declare=True, fresh=True) as other:
        foreign = _refused(await other.call(kit.digest, {"data": entry["ref"]}),
                           "another owner's key")
        unknown = _refused(await other.call(kit.digest, {"data": absent_ref(never)}),
                           "an unknown key")
    equal(masked(foreign, key), masked(unknown, never),
          "another owner's key and an unknown key refused alike")


async def _derived_refused(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        body = entry["ref"]["$ref"]
        recipe = {"$ref": {"type": "JsonPointer", "source": body, "path": ""}}
        _refused(await s.call(kit.digest, {"data": recipe}), "a derived ref written by a client")


async def _near_envelope_refused(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        near = {**entry["ref"], "note": "extra"}
        _refused(await s.call(kit.digest, {"data": near}), "an envelope with a member beside $ref")


async def _fallback_core(kit: Kit) -> None:
    async with kit.open(declare=False) as s:
        result = await s.call(kit.emit, {"size": kit.large})
        check(IDENTIFIER not in _meta(result),
              f"_meta[{IDENTIFIER!r}] sent to a client that did not declare the extension")
        check(not result.is_error, f"an error without the extension: {text_of(result)[:200]!r}")


async def _schema_accepts(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        tools = {t.name: t for t in await s.list_tools()}
    if kit.digest not in tools:
        raise NotApplicable(f"{kit.digest!r} is not listed (the server declares it on demand)")
    schema = tools[kit.digest].input_schema
    prop = (schema.get("properties") or {}).get("data")
    check(accepts_refs(prop, schema),
          f"{kit.digest!r}'s inputSchema property 'data' admits no $ref envelope: {prop!r}")


CORE_CASES: tuple[Case, ...] = (
    Case("advertised", "A server claiming the extension lists dev.byref/refs, with its version, "
         "in its capabilities (§1).", _advertised),
    Case("small-inline", "A result under the server's inlineBytes is shown whole and announces "
         "no stored ref (§6).", _small_inline),
    Case("placed-announced", "A large result is stored: the text shows a preview and the key, and "
         "_meta announces the Blob ref with its true bytes, sha256, mediaType and expiry (§6).",
         _placed_announced),
    Case("resolves-exact", "A Blob ref in a top-level argument reaches the tool as the exact "
         "stored bytes (§3, §4).", _resolves_exact),
    Case("absent-one-way", "Absent keys are refused as tool errors, the tool not run, in the same "
         "words but for the key (§4, §7).", _absent_one_way),
    Case("absent-other-owner", "A key minted for another owner is refused exactly as a key that "
         "never existed (§5).", _absent_other_owner),
    Case("derived-refused", "A derived ref (JsonPointer, JsonQuery) written by a client is "
         "refused, the tool not run (§2, §7).", _derived_refused),
    Case("near-envelope-refused", "An object with $ref and another member is refused, never "
         "passed on as data (§2).", _near_envelope_refused),
    Case("fallback-core", "A client that did not declare the extension gets no "
         "_meta[dev.byref/refs] (§9).", _fallback_core),
    Case("schema-accepts", "A tool that resolves refs says so in its inputSchema: the property "
         "admits the envelope (§8).", _schema_accepts),
)
"""The cases of §1–§9, in the order the report lists them."""

