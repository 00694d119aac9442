"""The refs battery's host-method cases (docs/extensions/refs.md §10): a client host, not the
model, reads, uploads and downloads a ref's bytes.

Owns `HOST_CASES`. The law, as every case's: a case reads only the wire (the methods' answers
and errors, the download URL's HTTP answer) and raises `CaseFailed` saying what it saw; one that
needs what the target cannot give (HTTP, a second owner) is not applicable, saying why.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from byref.battery import check, equal
from byref.extension.conformance.cases import (
    Case,
    Kit,
    NotApplicable,
    Reply,
    Session,
    absent_ref,
    fresh_key,
    masked,
    placed,
    text_of,
)
from byref.extension.conformance.probe import probe_digest, probe_text
from byref.extension.protocol import IDENTIFIER

STAT = f"{IDENTIFIER}/stat"
READ = f"{IDENTIFIER}/read"
UPLOAD = f"{IDENTIFIER}/upload"
AUTHORIZE_DOWNLOAD = f"{IDENTIFIER}/authorizeDownload"


def _answer(reply: Reply, what: str) -> dict[str, Any]:
    check(reply.result is not None, f"{what} was refused: {reply.code} {reply.message[:300]!r}")
    assert reply.result is not None
    return reply.result


def _refused(reply: Reply, what: str) -> str:
    check(reply.result is None, f"{what} was answered, not refused: "
                                f"{str(reply.result)[:200]!r}")
    check(0 < len(reply.message) <= 4_000, f"{what}: a refusal of {len(reply.message):,} "
                                           "characters")
    return f"{reply.code} {reply.message}"


async def _host_stat(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        got = _answer(await s.request(STAT, {"ref": entry["ref"]}), "stat of an announced ref")
    equal(got.get("bytes"), kit.large, "stat bytes")
    equal(got.get("sha256"), probe_digest(kit.large), "stat sha256")
    check(isinstance(got.get("mediaType"), str), f"stat gave no mediaType: {got!r}")
    check("expiresAt" in got, f"stat gave no expiresAt (null for none): {got!r}")
    check("data" not in got, "stat sent the bytes")


async def _read_all(s: Session, ref: dict[str, Any], step: int, limit: int) -> bytes:
    out, offset = bytearray(), 0
    for _ in range(limit):
        got = _answer(await s.request(READ, {"ref": ref, "offset": offset, "length": step}),
                      f"read at offset {offset:,}")
        chunk = base64.b64decode(str(got.get("data", "")), validate=True)
        check(len(chunk) <= step, f"read of {step:,} bytes answered {len(chunk):,}")
        equal(got.get("offset"), offset, "read offset")
        out += chunk
        offset += len(chunk)
        if got.get("eof") is True:
            return bytes(out)
        check(len(chunk) > 0, f"read at offset {offset:,} answered no bytes and no eof")
    raise AssertionError(f"read not at eof after {limit} ranges")


async def _host_read_ranges(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        step = kit.large // 3 + 7
        got = await _read_all(s, entry["ref"], step, 16)
    equal(len(got), kit.large, "bytes read in ranges")
    equal(hashlib.sha256(got).hexdigest(), probe_digest(kit.large),
          "sha256 of the ranges joined")


async def _host_upload(kit: Kit) -> None:
    size = kit.large
    data = probe_text(size).encode()
    half = size // 2
    async with kit.open(declare=True) as s:
        part = _answer(await s.request(UPLOAD, {
            "data": base64.b64encode(data[:half]).decode(), "final": False}), "a first part")
        check(isinstance(part.get("part"), dict), f"a part answered no part ref: {part!r}")
        done = _answer(await s.request(UPLOAD, {
            "data": base64.b64encode(data[half:]).decode(), "parts": [part["part"]],
            "mediaType": "text/plain"}), "the joining upload")
        equal(done.get("bytes"), size, "uploaded bytes")
        equal(done.get("sha256"), probe_digest(size), "uploaded sha256")
        result = await s.call(kit.digest, {"data": done.get("ref")})
        got = text_of(result)
        check(not result.is_error, f"the uploaded ref was refused by a tool: {got[:300]!r}")
        check(probe_digest(size) in got, f"the tool received other bytes than were uploaded: "
                                         f"its digest {got[:80]!r}")


async def _host_absent(kit: Kit) -> None:
    one, two = fresh_key(), fresh_key()
    async with kit.open(declare=True) as s:
        first = _refused(await s.request(STAT, {"ref": absent_ref(one)}), "stat of an unknown key")
        second = _refused(await s.request(READ, {"ref": absent_ref(two)}),
                          "read of an unknown key")
        equal(masked(second, two), masked(first, one), "two unknown keys' refusals")
        if not kit.other_owner:
            return
        _, entry = await placed(s, kit)
    key = entry["ref"]["$ref"]["key"]
    async with kit.open(declare=True, fresh=True) as other:
        foreign = _refused(await other.request(STAT, {"ref": entry["ref"]}),
                           "stat of another owner's key")
    equal(masked(foreign, key), masked(first, one),
          "another owner's key and an unknown key refused alike")


async def _host_download(kit: Kit) -> None:
    if kit.fetch is None:
        raise NotApplicable("the target is reached over stdio: no HTTP to download from")
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
        got = _answer(await s.request(AUTHORIZE_DOWNLOAD, {"ref": entry["ref"]}),
                      "authorizeDownload of an announced ref")
    url = got.get("url")
    check(isinstance(url, str) and url.startswith(("http://", "https://")),
          f"authorizeDownload gave no http(s) URL: {got!r}")
    check(isinstance(got.get("expiresAt"), str), f"a download URL without expiresAt: {got!r}")
    assert isinstance(url, str)
    status, body = await kit.fetch(url, False)
    equal(status, 200, "the download URL's status")
    equal(hashlib.sha256(body).hexdigest(), probe_digest(kit.large), "downloaded sha256")
    never = url.rstrip("/").rsplit("/", 1)[0] + "/" + fresh_key()
    unknown = await kit.fetch(never, False)
    check(unknown[0] >= 400, f"a URL never issued answered {unknown[0]}")
    if kit.other_owner:
        foreign = await kit.fetch(url, True)
        equal(foreign, unknown, "another owner's URL and a URL never issued")


NOT_DECLARED = (-32021, -32601)
"""SEP-2133's missing required client capability, or core MCP's method not found."""


async def _host_undeclared(kit: Kit) -> None:
    async with kit.open(declare=True) as s:
        _, entry = await placed(s, kit)
    async with kit.open(declare=False) as plain:
        reply = await plain.request(STAT, {"ref": entry["ref"]})
    _refused(reply, "stat from a client that did not declare the extension")
    check(reply.code in NOT_DECLARED, f"a client that did not declare the extension was refused "
                                      f"with {reply.code} {reply.message[:200]!r}, not as "
                                      f"undeclared ({' or '.join(map(str, NOT_DECLARED))})")


HOST_CASES: tuple[Case, ...] = (
    Case("host-stat", "stat answers an announced ref's true bytes, sha256, mediaType and expiry, "
         "without its bytes (§10).", _host_stat),
    Case("host-read-ranges", "read answers the exact stored bytes range by range, at the offsets "
         "asked, eof on the last (§10).", _host_read_ranges),
    Case("host-upload", "Bytes uploaded in parts become one Blob ref whose stat and whose "
         "delivery into a tool are byte-exact (§10).", _host_upload),
    Case("host-absent", "A host method refuses an unknown key and another owner's key alike, "
         "in the same words but for the key (§5, §10).", _host_absent),
    Case("host-download", "authorizeDownload gives an expiring URL whose GET answers the exact "
         "bytes to the owner only; another owner's GET is refused as a URL never issued (§10).",
         _host_download),
    Case("host-undeclared", "A client that did not declare the extension is refused the host "
         "methods as undeclared: -32021 (SEP-2133) or -32601 (§9, §10).", _host_undeclared),
)
"""The host methods' cases, in the order the report lists them."""
