"""Code mode's handles: what stands in the program for a result too large to send it whole.

Owns one run's handles (`Handles`): the ids it issued, the ref each stands for, and each one's
read cursor. An inner result the dispatcher placed (or a payload it stored) becomes a handle —
ref, kind, size, shape, preview — whose data the program streams in chunks on demand; a ref in
the model's inputs becomes one too, and so does every ref a result carries (`walk`, over the
part's recorded `derived` refs): a recipe (`read_json`'s and `query_json`'s `value`), a Blob or
Message ref nested in a structured result. Passed back as an argument, a handle is replaced by
its ref (no bytes cross the channel); a recipe, which only server code may build, is passed as
the server's own (`server_built`), and returned from the program it is recorded as a derived
field of the run's result, which the model sees as a Message ref to that field. The law: a
handle is its run's alone — an id the run did not issue is refused (`UnknownHandle`), so code
reaches only what its calls and inputs gave it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from byref.errors import Refused
from byref.jsonview import bounded, dumps, encode, shape_hint
from byref.refs import (
    ENVELOPE_KEY,
    Blob,
    Ref,
    RefRefusal,
    envelope,
    is_envelope,
    is_recipe,
    parse_model_envelope,
)
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
    ref: Ref | None = None
    """The ref itself when only server code may build it (a recipe); else None."""
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

    def issue(self, env: dict[str, Any], key: str | None, info: dict[str, Any], *,
              ref: Ref | None = None, whole: bytes | None = None) -> dict[str, Any]:
        """The handle for `env` (one per stored key), as the program receives it; `ref` is
        the server-built ref `env` holds (see `_Entry.ref`), `whole` its data if read."""
        with self._lock:
            hid = self._by_key.get(key) if key is not None else None
            if hid is None:
                hid = f"h{len(self._entries) + 1}"
                shown = {k: v for k, v in info.items() if v is not None}
                self._entries[hid] = _Entry(env, key, {"id": hid, "ref": key, **shown}, ref=ref,
                                            whole=whole)
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

    def walk(self, value: Any, derived: Mapping[str, Ref] | None = None) -> Any:
        """`value` (a result as recorded, its recipes and refs in `derived` by dot-path, as
        `Part.derived` holds them) as the program receives it: every ref in it a handle."""
        derived = derived or {}
        if value == _PLACEHOLDER and "value" in derived:  # the whole result is a ref
            return self.handle(derived["value"])
        return self._walk(value, derived, "")

    def _walk(self, value: Any, derived: Mapping[str, Ref], path: str) -> Any:
        if isinstance(value, dict):
            if value.get("opaque") is True and is_envelope(value.get("value")):
                with contextlib.suppress(RefRefusal):
                    ref = parse_model_envelope(value["value"])
                    if isinstance(ref, Blob) and ref.key is not None:
                        return self.stored(ref.key, value)
            found = derived.get(path) if path else None
            if found is not None and (value == _PLACEHOLDER or is_envelope(value)):
                return self.handle(found)
            if is_envelope(value) and isinstance(value[ENVELOPE_KEY], dict):
                try:
                    return self.handle(parse_model_envelope(value))
                except RefRefusal:
                    return value  # data that only looks like a ref: passed on as data
            # A result never records a handle (`{"$ref": "r…"}`): one in a value is its data.
            return {k: self._walk(v, derived, f"{path}.{k}" if path else str(k))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v, derived, f"{path}.{i}" if path else str(i))
                    for i, v in enumerate(value)]
        return value

    def handle(self, ref: Ref) -> dict[str, Any]:
        """The handle for a ref a result carries. A stored artifact's is `stored`'s; a recipe
        is evaluated here, host-side, for its size, shape and preview, and its `ref` is the
        recipe as byref records it (the model may not write one: returned from the program, it
        reaches the model as a Message ref to the run result's field)."""
        if isinstance(ref, Blob) and ref.key is not None:
            return self.stored(ref.key, {})
        if not _server_only(ref):
            return self.issue(envelope(ref), None, {"kind": "ref"})
        env = envelope(ref)
        info: dict[str, Any] = {"kind": "ref", "ref": dumps(env)}
        whole: bytes | None = None
        try:
            value = self.ctx.resolver.value(ref)
        except (RefRefusal, ArtifactError):
            pass  # read on demand (`read` then says why it cannot be)
        else:
            whole = (value if isinstance(value, bytes) else
                     value.encode() if isinstance(value, str) else encode(value))
            info |= {"kind": "json", "bytes": len(whole), "mediaType": "application/json",
                     "shape": shape_hint(value), "preview": _preview(value)}
        return self.issue(env, None, info, ref=ref, whole=whole)

    def refs(self, value: Any, *, returned: bool = False) -> Any:
        """`value` from the program with each handle replaced by its ref (for the program's
        return value, `returned`: a server-built ref as the `Ref` itself, recorded as derived);
        raises `UnknownHandle` for an id this run never issued."""
        if isinstance(value, dict):
            if len(value) == 1 and "$handle" in value:
                entry = self._entry(value["$handle"])
                if returned and entry.ref is not None:
                    return entry.ref
                return entry.envelope
            return {k: self.refs(v, returned=returned) for k, v in value.items()}
        if isinstance(value, list):
            return [self.refs(v, returned=returned) for v in value]
        return value

    def server_built(self, args: Mapping[str, Any]) -> frozenset[str]:
        """The arguments (of a call from the program) that are a handle for a ref only server
        code may build: dispatch parses theirs as the server's (`Call.server_refs`)."""
        return frozenset(
            name for name, value in args.items()
            if isinstance(value, dict) and len(value) == 1 and "$handle" in value
            and self._entry(value["$handle"]).ref is not None)

    def _entry(self, hid: Any) -> _Entry:
        entry = self._entries.get(hid) if isinstance(hid, str) else None
        if entry is None:
            raise UnknownHandle(str(hid)[:40])
        return entry

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
                ref = entry.ref if entry.ref is not None else parse_model_envelope(entry.envelope)
                value = self.ctx.resolver.value(ref)
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


_PLACEHOLDER: dict[str, Any] = {"derived": True}
"""What a result records where it held a ref (dispatch's `results`): the ref is in `derived`."""
PREVIEW_CHARS = 2_000
"""Characters of a recipe handle's preview (its compact JSON, pruned to fit)."""


def _server_only(ref: Ref) -> bool:
    """Whether only server code may build `ref`: it is, or is made over, a recipe."""
    if is_recipe(ref):
        return True
    return isinstance(ref, Blob) and ref.source is not None and _server_only(ref.source)


def _preview(value: Any) -> str:
    return value[:PREVIEW_CHARS] if isinstance(value, str) else dumps(
        bounded(value, PREVIEW_CHARS))
