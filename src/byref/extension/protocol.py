"""The `dev.byref/refs` extension's wire vocabulary (docs/extensions/refs.md), in one place.

Owns the identifier and version, whether a request's client declared the extension (`declared`),
the settings a server advertises (`settings`), the `_meta` announcement of a result's stored refs
(`entry`, `announcement`, `announced`) and how a tool's input schema says it accepts refs
(`accepts_refs`). The law: everything the extension adds to core MCP is keyed by `IDENTIFIER`
and is sent only to a client that declared it; a side without it sees core MCP unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from byref.refs import ENVELOPE_KEY, Blob, envelope, is_envelope, parse_server_ref
from byref.store import ArtifactMeta

IDENTIFIER: Final = "dev.byref/refs"
"""The extension's SEP-2133 identifier (`{vendor-prefix}/{name}`)."""
VERSION: Final = "0.2"
"""The version of docs/extensions/refs.md this code implements."""
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
"""Where a 2026-07-28 request carries its client's capabilities (`_meta`)."""
FILE_URI_PREFIX: Final = "mcp-file://byref/"
"""A stored value's SEP-2631 file URI: this, then its key."""


def settings(*, inline_bytes: int) -> dict[str, Any]:
    """What a server advertises under `capabilities.extensions[IDENTIFIER]`: the version, the
    size above which its results are stored and announced rather than inserted, and the
    SEP-2631 `files` capability its `files/*` methods serve."""
    return {"version": VERSION, "inlineBytes": inline_bytes,
            "files": {"upload": {}, "download": {}, "transports": {"https": {}}}}


def _lists(capabilities: object) -> bool:
    """Whether a capabilities object (a model or its JSON) names IDENTIFIER under `extensions`
    or `experimental`."""
    for where in ("extensions", "experimental"):
        found = (capabilities.get(where) if isinstance(capabilities, Mapping)
                 else getattr(capabilities, where, None))
        if isinstance(found, Mapping) and IDENTIFIER in found:
            return True
    return False


def declared(request_meta: object, session_capabilities: object) -> bool:
    """Whether the client declared the extension: in this request's `_meta` capabilities
    (2026-07-28, per request), else in the capabilities its `initialize` sent (handshake era)."""
    meta: Any = request_meta
    if meta is not None and not isinstance(meta, Mapping):
        meta = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else None
    if isinstance(meta, Mapping):
        per_request = meta.get(CLIENT_CAPABILITIES_META_KEY)
        if per_request is not None:
            return _lists(per_request)
    return session_capabilities is not None and _lists(session_capabilities)


def entry(meta: ArtifactMeta, *, block: int, shape: str | None) -> dict[str, Any]:
    """One stored ref as a result announces it: the ref, where it stands in the content
    (`block`), its size, media type, sha-256 (hex), shape, expiry (ISO-8601 UTC or null) and,
    when it has a digest, the same value as a SEP-2631 `FileValue` (`file`)."""
    from datetime import UTC, datetime

    expires = None if meta.expires_at is None else datetime.fromtimestamp(
        meta.expires_at, UTC).isoformat().replace("+00:00", "Z")
    digest = meta.digest.removeprefix("sha256:") if meta.digest is not None else None
    out = {"ref": envelope(Blob(key=meta.ref)), "block": block, "bytes": meta.bytes,
           "mediaType": meta.media_type, "sha256": digest, "shape": shape,
           "expiresAt": expires}
    if digest is not None:
        out["file"] = file_value(meta, digest)
    return out


def b64url(hex_digest: str) -> str:
    """A hex sha-256 as SEP-2631 writes digests: unpadded base64url of the raw bytes."""
    import base64

    return base64.urlsafe_b64encode(bytes.fromhex(hex_digest)).decode().rstrip("=")


def file_value(meta: ArtifactMeta, sha256_hex: str) -> dict[str, Any]:
    """A stored value as SEP-2631's `FileValue`: its file URI, name, media type, size, digest."""
    out: dict[str, Any] = {"uri": FILE_URI_PREFIX + meta.ref, "mimeType": meta.media_type,
                           "size": meta.bytes,
                           "digest": {"algorithm": "sha-256", "value": b64url(sha256_hex)}}
    if meta.label:
        out["name"] = meta.label
    return out


def announcement(entries: list[dict[str, Any]], result_ref: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """A result's `_meta[IDENTIFIER]`: its stored refs and, for an inline result, its own ref."""
    out: dict[str, Any] = {"refs": entries}
    if result_ref is not None:
        out["result"] = result_ref
    return out


def announced(result_meta: object) -> list[dict[str, Any]]:
    """The stored refs a result's `_meta` announces ([] when it announces none)."""
    if not isinstance(result_meta, Mapping):
        return []
    found = result_meta.get(IDENTIFIER)
    refs = found.get("refs") if isinstance(found, Mapping) else None
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def blob_key(ref: object) -> str | None:
    """The artifact key of a Blob-by-key envelope, else None."""
    if not is_envelope(ref):
        return None
    assert isinstance(ref, dict)
    try:
        parsed = parse_server_ref(ref[ENVELOPE_KEY])
    except ValueError:
        return None
    return parsed.key if isinstance(parsed, Blob) else None


def accepts_refs(schema: object, root: object = None, *, depth: int = 0) -> bool:
    """Whether a property's JSON Schema admits a `$ref` envelope: an object requiring `$ref`,
    directly, through `anyOf` / `oneOf`, or through a `#/$defs/<name>` pointer into `root`."""
    if not isinstance(schema, Mapping) or depth > 8:
        return False
    required = schema.get("required")
    if isinstance(required, list) and ENVELOPE_KEY in required:
        return True
    pointer = schema.get("$ref")
    if isinstance(pointer, str) and pointer.startswith("#/$defs/") and isinstance(root, Mapping):
        defs = root.get("$defs")
        target = defs.get(pointer.removeprefix("#/$defs/")) if isinstance(defs, Mapping) else None
        if accepts_refs(target, root, depth=depth + 1):
            return True
    return any(accepts_refs(s, root, depth=depth + 1) for key in ("anyOf", "oneOf")
               for s in (schema.get(key) or []))
