"""SEP-2631 (draft "File Objects and Transfer") mapped onto the refs host methods.

Owns the draft's methods as byref answers them (a stored value as a `FileValue` is
`protocol.file_value`: an `mcp-file://byref/<key>` URI, name, media type, size, sha-256 digest
in unpadded base64url): `files/authorizeDownload` (a file URI → the download URL of
`host.authorize_download`, as the draft's `{file, download}`), `files/authorizeUpload` (a
declared size and digest → an upload grant and the URL a `PUT` of the bytes goes to, as
`{file, upload}`) and what that `PUT` does (`receive`). Followed: PR #2631 as implementers
pinned it (head c3cf0eba: `authorizeUpload` / `authorizeDownload`, `x-mcp-file`, `FileValue`
with a `FileDigest`). The law: a file URI names a Blob ref and nothing more — resolved under the
request's owner, absent alike whatever the reason — and an upload is kept only when its bytes
are exactly the size and digest declared.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from byref.extension.host import (
    MAX_UPLOAD_BYTES,
    UPLOAD_KIND,
    URL_SECONDS,
    HostRefused,
    absent,
    authorize_download,
    described,
    iso,
    url_absent,
)
from byref.extension.protocol import FILE_URI_PREFIX as URI_PREFIX
from byref.extension.protocol import b64url, file_value
from byref.refs import KEY_PATTERN, Blob, envelope, quote
from byref.store import ArtifactStore, PutOptions, Scope

AUTHORIZE_DOWNLOAD: Final = "files/authorizeDownload"
AUTHORIZE_UPLOAD: Final = "files/authorizeUpload"
METHODS: Final = (AUTHORIZE_DOWNLOAD, AUTHORIZE_UPLOAD)
UPLOAD_PATH: Final = "/refs/upload/"
"""Where an upload URL points, under the server's HTTP root; the grant's key follows."""
UPLOAD_GRANT_KIND: Final = "refs/upload-grant"


def key_of(uri: object) -> str:
    """The Blob key a byref file URI names (raises `HostRefused` for any other value)."""
    if isinstance(uri, str) and uri.startswith(URI_PREFIX) and re.fullmatch(
            KEY_PATTERN, uri.removeprefix(URI_PREFIX)):
        return uri.removeprefix(URI_PREFIX)
    raise HostRefused(f"'uri' must be a file URI this server issued ({URI_PREFIX}art_…); got "
                      f"{quote(uri)}.")


def authorize_file_download(store: ArtifactStore, scope: Scope, params: Mapping[str, Any],
                            base_url: str | None) -> dict[str, Any]:
    """`files/authorizeDownload`: the file and a `GET` descriptor for its bytes."""
    key = key_of(params.get("uri"))
    link = authorize_download(store, scope, {"ref": envelope(Blob(key=key))}, base_url)
    meta = store.head(scope, key)
    if meta is None:
        raise absent(key)
    digest = meta.digest.removeprefix("sha256:") if meta.digest else None
    file = file_value(meta, digest) if digest else {"uri": URI_PREFIX + key,
                                                     "mimeType": meta.media_type,
                                                     "size": meta.bytes}
    return {"file": file, "download": {"transport": "https", "method": "GET",
                                       "url": link["url"], "headers": {},
                                       "expiresAt": link["expiresAt"]}}


def authorize_file_upload(store: ArtifactStore, scope: Scope, params: Mapping[str, Any],
                          base_url: str | None) -> dict[str, Any]:
    """`files/authorizeUpload`: a grant for exactly `size` bytes (and `digest`, if given) and
    the `PUT` descriptor they go to; the answer's file URI is the grant's until they arrive."""
    if base_url is None:
        raise HostRefused("This server is not reached over HTTP here, so it has no upload URL to "
                          "give; send the bytes with 'dev.byref/refs/upload'.")
    size = params.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_UPLOAD_BYTES:
        raise HostRefused(f"'size' must be the file's exact size, 0 to {MAX_UPLOAD_BYTES:,} "
                          f"bytes; got {quote(size)}.")
    media = params.get("mimeType", "application/octet-stream")
    name = params.get("name")
    digest = params.get("digest")
    want = None
    if digest is not None:
        if not (isinstance(digest, Mapping) and digest.get("algorithm") == "sha-256"
                and isinstance(digest.get("value"), str)):
            raise HostRefused("'digest' must be {\"algorithm\": \"sha-256\", \"value\": "
                              "<unpadded base64url>}.")
        want = str(digest["value"])
    if not isinstance(media, str) or not 0 < len(media) <= 200 or (
            name is not None and (not isinstance(name, str) or len(name) > 500)):
        raise HostRefused("'mimeType' must be a media type (text, at most 200 characters) and "
                          "'name', if given, text of at most 500 characters.")
    grant = store.put(scope, json.dumps({"size": size, "digest": want, "mimeType": media,
                                         "name": name}).encode(),
                      PutOptions(kind=UPLOAD_GRANT_KIND, media_type="application/json",
                                 ttl=float(URL_SECONDS)))
    file: dict[str, Any] = {"uri": URI_PREFIX + "upload/" + grant.ref, "mimeType": media,
                            "size": size}
    if name is not None:
        file["name"] = name
    if want is not None:
        file["digest"] = {"algorithm": "sha-256", "value": want}
    return {"file": file, "upload": {
        "transport": "https", "method": "PUT", "headers": {"Content-Type": media},
        "url": base_url.rstrip("/") + UPLOAD_PATH + grant.ref,
        "expiresAt": iso(grant.expires_at)}}


def receive(store: ArtifactStore, scope: Scope, grant_key: str, data: bytes) -> dict[str, Any]:
    """A `PUT` to an upload URL: the bytes kept as a Blob if they are exactly what the grant
    declared (the grant then spent); answers the file and its ref as `stat` does."""
    grant = store.get(scope, grant_key) if grant_key.startswith("art_") else None
    if grant is None or grant.meta.kind != UPLOAD_GRANT_KIND:
        raise url_absent()
    terms = json.loads(grant.data)
    if len(data) != terms["size"]:
        raise HostRefused(f"The upload declared {terms['size']:,} bytes and {len(data):,} "
                          "arrived; nothing was kept. Ask authorizeUpload again.")
    hex_digest = hashlib.sha256(data).hexdigest()
    if terms["digest"] is not None and b64url(hex_digest) != terms["digest"]:
        raise HostRefused("The bytes do not match the declared sha-256 digest; nothing was kept. "
                          "Ask authorizeUpload again.")
    meta = store.put(scope, data, PutOptions(kind=UPLOAD_KIND, media_type=terms["mimeType"],
                                             label=terms["name"], digest=True))
    store.delete(scope, grant_key)
    return {**described(meta, hex_digest), "file": file_value(meta, hex_digest)}


def handle(method: str, store: ArtifactStore, scope: Scope, params: Mapping[str, Any],
           base_url: str | None) -> dict[str, Any]:
    """Answer one SEP-2631 method (its params as JSON) or raise `HostRefused`."""
    if method == AUTHORIZE_DOWNLOAD:
        return authorize_file_download(store, scope, params, base_url)
    return authorize_file_upload(store, scope, params, base_url)

