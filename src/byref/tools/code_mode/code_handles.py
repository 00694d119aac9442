"""Code mode's handles: what stands in the program for a result too large to send it whole.

Owns one run's handles (`Handles`): the ids it issued, the ref each stands for, and each one's
read cursor. An inner result the dispatcher placed (or a payload it stored) becomes a handle —
ref, kind, size, shape, preview — whose data the program streams in chunks on demand; a ref in
the model's inputs becomes one too. Passed back as an argument, a handle is replaced by its ref
(no bytes cross the channel). The law: a handle is its run's alone — an id the run did not
issue is refused (`UnknownHandle`), so code reaches only what its calls and inputs gave it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from byref.errors import Refused
from byref.jsonview import dumps, encode
from byref.refs import Blob, RefRefusal, envelope, is_envelope, parse_model_envelope
from byref.store.port import ArtifactError, CanGetStream
from byref.tools.call_context import ToolContext
from byref.tools.code_mode.channel import READ_MAX, Answer, Read


class UnknownHandle(Refused):
    """An argument names a handle this run never issued (the host refuses the call)."""

    reason = "bad-ref"


@dataclass
class _Entry:
    """One handle this run issued: what stands for it in a call, and its data's cursor."""

    envelope: dict[str, Any]
    key: str | None
    info: dict[str, Any]
    offset: int = 0
    chunks: Any = None
    left: bytes = b""
    whole: bytes | None = None


class Handles:
    """The handles one run issued, over the caller's store and resolver (`ctx`)."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self._entries: dict[str, _Entry] = {}
        self._by_key: dict[str, str] = {}
        self._lock = threading.Lock()

    def issue(self, env: dict[str, Any], key: str | None,
              info: dict[str, Any]) -> dict[str, Any]:
        """The handle for `env` (one per stored key), as the program receives it."""
        with self._lock:
            hid = self._by_key.get(key) if key is not None else None
            if hid is None:
                hid = f"h{len(self._entries) + 1}"
                shown = {k: v for k, v in info.items() if v is not None}
                self._entries[hid] = _Entry(env, key, {"id": hid, "ref": key, **shown})
                if key is not None:
                    self._by_key[key] = hid
            return {"$handle": self._entries[hid].info}

    def stored(self, key: str, shown: Mapping[str, Any]) -> dict[str, Any]:
        """The handle for stored artifact `key`, described by what dispatch showed of it."""
        preview = shown.get("preview")
        info = {"kind": shown.get("kind"), "bytes": shown.get("bytes"),
                "mediaType": shown.get("mediaType"), "shape": shown.get("shape"),
                "preview": preview if isinstance(preview, str | None) else dumps(preview)}
        if info["kind"] is None and self.ctx.has_artifacts:
            meta = self.ctx.artifacts.head(key)
            if meta is not None:
                info |= {"kind": meta.kind, "bytes": meta.bytes, "mediaType": meta.media_type}
        return self.issue(envelope(Blob(key=key)), key, info)

    def walk(self, value: Any) -> Any:
        """`value` as the program receives it: every ref in it a handle."""
        if isinstance(value, dict):
            if value.get("opaque") is True and is_envelope(value.get("value")):
                ref = parse_model_envelope(value["value"])
                if isinstance(ref, Blob) and ref.key is not None:
                    return self.stored(ref.key, value)
            if is_envelope(value):
                ref = parse_model_envelope(value)
                if isinstance(ref, Blob) and ref.key is not None:
                    return self.stored(ref.key, {})
                return self.issue(value, None, {"kind": "ref"})
            return {k: self.walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        return value

    def refs(self, value: Any) -> Any:
        """`value` from the program with each handle replaced by its ref; raises
        `UnknownHandle` for an id this run never issued."""
        if isinstance(value, dict):
            if len(value) == 1 and "$handle" in value:
                hid = value["$handle"]
                entry = self._entries.get(hid) if isinstance(hid, str) else None
                if entry is None:
                    raise UnknownHandle(str(hid)[:40])
                return entry.envelope
            return {k: self.refs(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.refs(v) for v in value]
        return value

    def read(self, request: Read) -> Answer:
        """The answer to the program's read of a handle's bytes (at most `READ_MAX`)."""
        entry = self._entries.get(request.handle)
        if entry is None:
            return Answer(request.id, error=f"handle {request.handle[:40]!r} was never given "
                          "to this run", reason="bad-ref")
        size = max(0, min(request.size, READ_MAX))
        try:
            return Answer(request.id, self._bytes(entry, max(0, request.offset), size))
        except (RefRefusal, ArtifactError) as exc:
            return Answer(request.id, error=f"handle {request.handle!r} cannot be read: {exc}",
                          reason="missing-or-expired")

    def _bytes(self, entry: _Entry, offset: int, size: int) -> bytes:
        if entry.key is None or not isinstance(self.ctx.store, CanGetStream):
            if entry.whole is None:
                value = self.ctx.resolver.value(parse_model_envelope(entry.envelope))
                entry.whole = (value if isinstance(value, bytes) else
                               value.encode() if isinstance(value, str) else encode(value))
            return entry.whole[offset:offset + size]
        if entry.chunks is None or offset != entry.offset:
            streamed = self.ctx.store.get_stream(self.ctx.scope, entry.key)
            if streamed is None:
                raise ArtifactError(f"{entry.key!r} is missing or expired")
            entry.chunks, entry.left, entry.offset = streamed.chunks, b"", 0
            while entry.offset < offset:  # a reader that jumped: read forward to it
                skipped = self._take(entry, offset - entry.offset)
                if not skipped:
                    break
        return self._take(entry, size)

    @staticmethod
    def _take(entry: _Entry, size: int) -> bytes:
        while len(entry.left) < size:
            chunk = next(entry.chunks, b"")
            if not chunk:
                break
            entry.left += chunk
        out, entry.left = entry.left[:size], entry.left[size:]
        entry.offset += len(out)
        return out
