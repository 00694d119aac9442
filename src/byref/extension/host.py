"""`dev.byref/refs` for a client host, not the model: a ref's bytes read, uploaded and downloaded.

Owns the host methods' names, limits and answers (docs/extensions/refs.md §10): `stat`, a
ranged `read`, `upload` (bytes in parts → a Blob ref any upstream behind the server can read),
`authorize_download` (an expiring URL) and `download`, what that URL's `GET` answers. Each runs
over an artifact store under the owner the server found for the request; a download grant is
itself a tiny stored record with its own expiry, so it is owner-scoped, survives the replica that
minted it and expires by the store's clock. The law: every absence — a key that never existed,
expired, or is another owner's; a grant likewise — is refused in one set of words, and every
request and answer is bounded (`MAX_READ_BYTES`, `MAX_CHUNK_BYTES`, `MAX_UPLOAD_BYTES`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from byref.errors import DeveloperError
from byref.extension.protocol import IDENTIFIER, blob_key
from byref.refs import Blob, envelope, quote
from byref.store import ArtifactMeta, ArtifactStore, PutOptions, Scope, can_get_stream
from byref.store.port import sha256_digest

STAT: Final = f"{IDENTIFIER}/stat"
READ: Final = f"{IDENTIFIER}/read"
UPLOAD: Final = f"{IDENTIFIER}/upload"
AUTHORIZE_DOWNLOAD: Final = f"{IDENTIFIER}/authorizeDownload"
METHODS: Final = (STAT, READ, UPLOAD, AUTHORIZE_DOWNLOAD)
"""The host methods, in the order the spec lists them."""

MAX_READ_BYTES: Final = 2 * 1024 * 1024
"""The most bytes one `read` answers (base64 in JSON: about 2.7 MB on the wire)."""
MAX_CHUNK_BYTES: Final = 2 * 1024 * 1024
"""The most bytes one `upload` request carries (under the SDK's 4 MiB HTTP body limit)."""
MAX_UPLOAD_BYTES: Final = 64 * 1024 * 1024
"""The most bytes one uploaded Blob may hold, all its parts together."""
MAX_PARTS: Final = 64
"""The most parts one `upload` may join."""
PART_SECONDS: Final = 3600.0
"""How long an uploaded part waits for the request that joins it."""
URL_SECONDS: Final = 300
"""A download URL's life unless the host asks for another (at most `MAX_URL_SECONDS`)."""
MAX_URL_SECONDS: Final = 3600
DOWNLOAD_PATH: Final = "/refs/download/"
"""Where a download URL points, under the server's HTTP root; the grant's key follows."""
GRANT_KIND: Final = "refs/download-grant"
PART_KIND: Final = "refs/upload-part"
UPLOAD_KIND: Final = "refs/upload"

INVALID_PARAMS: Final = -32602
NOT_FOUND: Final = -32002
"""The JSON-RPC code of an absent ref or grant (MCP's "resource not found")."""
NOT_DECLARED: Final = -32021
"""SEP-2133's "missing required client capability": the client did not declare the extension."""
UNKNOWN_METHOD: Final = -32601


class HostRefused(DeveloperError):
    """A host method's request cannot be answered; `code` is its JSON-RPC error code and the
    message says what went wrong and what would fit."""

    def __init__(self, message: str, code: int = INVALID_PARAMS) -> None:
        super().__init__(message)
        self.code = code


def absent(key: str) -> HostRefused:
    """The one refusal for a ref that is not there, whatever the reason."""
    return HostRefused(f"Ref {key!r} is not available: it is missing, expired, or was never "
                       "stored here.", NOT_FOUND)


def url_absent() -> HostRefused:
    """The one refusal for a download URL that is not (or no longer) valid for its caller."""
    return HostRefused("This download URL is not valid: it expired, was never issued here, or "
                       "was issued to another owner. Ask authorizeDownload for a new one.",
                       NOT_FOUND)


def undeclared(method: str) -> HostRefused:
    """What a client that did not declare the extension is told of a host method."""
    return HostRefused(f"Method {method!r} belongs to the {IDENTIFIER!r} extension, which this "
                       "request's client did not declare.", NOT_DECLARED)


def described(meta: ArtifactMeta, digest: str) -> dict[str, Any]:
    """A stored value as the host methods answer it: ref, size, media type, sha-256, expiry."""
    return {"ref": envelope(Blob(key=meta.ref)), "bytes": meta.bytes,
            "mediaType": meta.media_type, "sha256": digest.removeprefix("sha256:"),
            "expiresAt": iso(meta.expires_at)}


def iso(epoch: float | None) -> str | None:
    """An epoch time as RFC 3339 UTC (`…Z`), None for none."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _key(params: Mapping[str, Any], name: str = "ref") -> str:
    value = params.get(name)
    key = blob_key(value)
    if key is None:
        raise HostRefused(f"{name!r} must be a Blob ref, {{\"$ref\": {{\"type\": \"Blob\", "
                          f"\"key\": \"art_…\"}}}}, as a result announced it; got "
                          f"{quote(value)}.")
    return key


def _int(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = params.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise HostRefused(f"{name!r} must be an integer from {low:,} to {high:,}; got "
                          f"{quote(value)}.")
    return value


def _meta_of(store: ArtifactStore, scope: Scope, key: str) -> ArtifactMeta:
    meta = store.head(scope, key)
    if meta is None or meta.kind in (GRANT_KIND, PART_KIND):
        raise absent(key)
    return meta


def stat(store: ArtifactStore, scope: Scope, params: Mapping[str, Any]) -> dict[str, Any]:
    """`stat`: the ref's size, media type, sha-256 and expiry, its bytes not sent."""
    key = _key(params)
    meta = _meta_of(store, scope, key)
    digest = meta.digest
    if digest is None:  # recorded without one: hashed once, here
        artifact = store.get(scope, key)
        if artifact is None:
            raise absent(key)
        digest = sha256_digest(artifact.data)
    return described(meta, digest)


def read(store: ArtifactStore, scope: Scope, params: Mapping[str, Any]) -> dict[str, Any]:
    """`read`: at most `MAX_READ_BYTES` of the ref's bytes from `offset` (base64), whether they
    end it (`eof`) and its whole size."""
    key = _key(params)
    offset = _int(params, "offset", 0, 0, 2**53 - 1)
    length = _int(params, "length", MAX_READ_BYTES, 1, MAX_READ_BYTES)
    meta = _meta_of(store, scope, key)
    if offset > meta.bytes:
        raise HostRefused(f"'offset' {offset:,} is past the end of {key!r} ({meta.bytes:,} "
                          "bytes).")
    chunk = _slice(store, scope, key, offset, length)
    return {"ref": envelope(Blob(key=key)), "offset": offset, "length": len(chunk),
            "bytes": meta.bytes, "eof": offset + len(chunk) >= meta.bytes,
            "data": base64.b64encode(chunk).decode()}


def _slice(store: ArtifactStore, scope: Scope, key: str, offset: int, length: int) -> bytes:
    # A streaming store verifies as it goes: the range is taken without holding the whole value.
    if can_get_stream(store):
        streamed = store.get_stream(scope, key)
        if streamed is None:
            raise absent(key)
        out, at = bytearray(), 0
        for chunk in streamed.chunks:  # read to the end: the last chunk is the verified one
            end = at + len(chunk)
            if end > offset and at < offset + length:
                out += chunk[max(0, offset - at):offset + length - at]
            at = end
        return bytes(out)
    artifact = store.get(scope, key)
    if artifact is None:
        raise absent(key)
    return artifact.data[offset:offset + length]


def _bytes(params: Mapping[str, Any]) -> bytes:
    data = params.get("data")
    if not isinstance(data, str):
        raise HostRefused(f"'data' must be the bytes as standard base64 text; got {quote(data)}.")
    if len(data) > (MAX_CHUNK_BYTES // 3 + 1) * 4:
        raise HostRefused(f"One upload request carries at most {MAX_CHUNK_BYTES:,} bytes; send "
                          "the file in parts ('final': false), then join them.")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise HostRefused("'data' is not valid base64 (standard alphabet, padded).") from None


def upload(store: ArtifactStore, scope: Scope, params: Mapping[str, Any]) -> dict[str, Any]:
    """`upload`: a part (`final` false: `{"part": ref}`) or the Blob made of the given `parts`
    and this `data`, in order (its `stat`); the parts are removed once joined."""
    chunk = _bytes(params)
    final = params.get("final", True)
    if not isinstance(final, bool):
        raise HostRefused(f"'final' must be true or false; got {quote(final)}.")
    if not final:
        meta = store.put(scope, chunk, PutOptions(kind=PART_KIND, ttl=PART_SECONDS))
        return {"part": envelope(Blob(key=meta.ref)), "bytes": meta.bytes}
    parts = params.get("parts", [])
    if not isinstance(parts, list) or len(parts) > MAX_PARTS:
        raise HostRefused(f"'parts' must be a list of at most {MAX_PARTS} part refs, in order.")
    media = params.get("mediaType", "application/octet-stream")
    name = params.get("name")
    if not isinstance(media, str) or not 0 < len(media) <= 200 or (
            name is not None and (not isinstance(name, str) or len(name) > 500)):
        raise HostRefused("'mediaType' must be a media type (text, at most 200 characters) and "
                          "'name', if given, text of at most 500 characters.")
    joined, keys = bytearray(), []
    for part in parts:
        key = _key({"part": part}, "part")
        got = store.get(scope, key)
        if got is None or got.meta.kind != PART_KIND:
            raise absent(key)
        joined += got.data
        keys.append(key)
        if len(joined) + len(chunk) > MAX_UPLOAD_BYTES:
            break
    joined += chunk
    if len(joined) > MAX_UPLOAD_BYTES:
        raise HostRefused(f"An uploaded value holds at most {MAX_UPLOAD_BYTES:,} bytes; these "
                          "parts hold more.")
    meta = store.put(scope, bytes(joined), PutOptions(
        kind=UPLOAD_KIND, media_type=media, label=name, digest=True))
    for key in keys:
        store.delete(scope, key)
    assert meta.digest is not None
    return described(meta, meta.digest)


def authorize_download(store: ArtifactStore, scope: Scope, params: Mapping[str, Any],
                       base_url: str | None) -> dict[str, Any]:
    """`authorizeDownload`: a URL under `base_url` whose `GET`, with the same credentials as the
    request, answers the ref's bytes until `expiresAt` (None `base_url`: no HTTP here)."""
    key = _key(params)
    seconds = _int(params, "ttlSeconds", URL_SECONDS, 1, MAX_URL_SECONDS)
    if base_url is None:
        raise HostRefused("This server is not reached over HTTP here, so it has no download URL "
                          f"to give; read the bytes with {READ!r}.")
    meta = _meta_of(store, scope, key)
    grant = store.put(scope, json.dumps({"key": key}).encode(), PutOptions(
        kind=GRANT_KIND, media_type="application/json", ttl=float(seconds)))
    return {"url": base_url.rstrip("/") + DOWNLOAD_PATH + grant.ref, "method": "GET",
            "expiresAt": iso(grant.expires_at), "bytes": meta.bytes,
            "mediaType": meta.media_type}


@dataclass(frozen=True)
class Download:
    """What a download URL answers: the stored value's record and its verified chunks."""

    meta: ArtifactMeta
    chunks: Iterator[bytes]


def download(store: ArtifactStore, scope: Scope, grant_key: str) -> Download:
    """The bytes a grant names, read in the caller's scope (raises `url_absent()` for a grant
    that is expired, unknown or another owner's, and for a value gone since)."""
    grant = store.get(scope, grant_key) if grant_key.startswith("art_") else None
    if grant is None or grant.meta.kind != GRANT_KIND:
        raise url_absent()
    try:
        key = str(json.loads(grant.data)["key"])
    except (ValueError, KeyError, TypeError):
        raise url_absent() from None
    if can_get_stream(store):
        streamed = store.get_stream(scope, key)
        if streamed is None:
            raise url_absent()
        return Download(streamed.meta, streamed.chunks)
    artifact = store.get(scope, key)
    if artifact is None:
        raise url_absent()
    return Download(artifact.meta, iter((artifact.data,)))


def handle(method: str, store: ArtifactStore, scope: Scope, params: Mapping[str, Any],
           base_url: str | None) -> dict[str, Any]:
    """Answer one host method (its params as JSON) or raise `HostRefused`."""
    if method == STAT:
        return stat(store, scope, params)
    if method == READ:
        return read(store, scope, params)
    if method == UPLOAD:
        return upload(store, scope, params)
    if method == AUTHORIZE_DOWNLOAD:
        return authorize_download(store, scope, params, base_url)
    raise HostRefused(f"Unknown host method {method!r}; the methods are {', '.join(METHODS)}.",
                      UNKNOWN_METHOD)
