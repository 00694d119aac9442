"""Built-in `read_result`: an explicit read of a kept result, with coverage facts.

Owns the tool face of `byref.reads`: a ref (a kept version's or placed result's `art_…` Blob, or
a Message ref to any earlier result) plus a selection (fields, offset, limit, max_bytes) becomes
the selected records and the facts of what was delivered. The law: the read runs under the
smallest of the caller's max_bytes, the explicit-read limit and the room the request has left;
it reads the stored version exactly (never a refetch); JSON Lines that fail to parse are counted
at their positions; an image or audio within that bound is answered with its ref and media type,
`"delivered": "image"` (the gateway attaches the bytes as image/audio content), a larger one is
refused; other binary payloads are refused with a pointer to the right tool, not decoded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from byref.jsonview import decode, encode
from byref.media import base, is_audio, is_image, is_json, is_json_lines, is_text
from byref.reads import (
    Item,
    ReadLimits,
    ReadRoom,
    ResultVersion,
    Source,
    json_lines_items,
    read,
    records_of,
)
from byref.refs import (
    MODEL_REF_SCHEMA,
    Blob,
    MessageRef,
    Ref,
    RefRefusal,
    envelope,
    is_envelope,
    parse_model_envelope,
)
from byref.resolve import BytesSource
from byref.store.port import ArtifactIntegrityError, ArtifactMeta
from byref.tools.call_context import ToolContext
from byref.tools.tool import Tool, ToolRefusal, tool

READ_RESULT_NAME: Final = "read_result"
EXPLICIT_READ_TOOLS: Final = frozenset({READ_RESULT_NAME})
"""Tools whose answers are explicit reads: bounded by the explicit-read limit, not placement's."""
_FOLLOW: Final = 3
DESCRIPTION: Final = (
    "Read an earlier result by its `ref` (an art_… Blob, or a Message ref to a tool result): its "
    "records or text, optionally only `fields`, from `offset`, at most `limit` (records, or "
    "characters of text) and `max_bytes`. The answer's `note` and `coverage` say what was "
    "delivered.")
_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"ref": MODEL_REF_SCHEMA,
                   "fields": {"type": "array", "items": {"type": "string"}},
                   "offset": {"type": "integer"}, "limit": {"type": "integer"},
                   "max_bytes": {"type": "integer"}},
    "required": ["ref"], "additionalProperties": False,
}


def make_read_result(limits: ReadLimits | None = None, room: ReadRoom | None = None) -> Tool:
    """A `read_result` tool under `limits`, bounded by `room` (request assembly's) if given."""
    limits = limits or ReadLimits()

    def read_result(
        ref: Ref, ctx: ToolContext, fields: list[str] | None = None, offset: int = 0,
        limit: int | None = None, max_bytes: int | None = None,
    ) -> dict[str, Any]:
        if offset < 0 or (limit is not None and limit < 0) or (
                max_bytes is not None and max_bytes <= 0):
            raise ToolRefusal(
                f"read_result needs offset >= 0, limit >= 0 and max_bytes > 0; got "
                f"offset={offset!r}, limit={limit!r}, max_bytes={max_bytes!r}.", "invalid-input")
        available = room.available() if room is not None else None
        try:
            source = load(ref, ctx)
        except _Media as media:
            answer = _media_answer(media, min(b for b in (max_bytes, available,
                                                          limits.explicit_read_bytes)
                                              if b is not None))
            if room is not None:
                room.consume(media.meta.bytes)
            return answer
        answer = read(source, fields=fields, offset=offset, limit=limit, max_bytes=max_bytes,
                      limits=limits, room=available)
        if room is not None:
            room.consume(len(encode(answer)))
        return answer

    made = tool(name=READ_RESULT_NAME, lazy=("ref",), capabilities=("data:read",),
                glossary=("page", "rows", "coverage", "reread", "version"),
                description=DESCRIPTION)(read_result)
    # Written out: the generated schema offers `null` for each optional argument, which costs
    # every turn and tells the model nothing.
    return replace(made, input_schema=_SCHEMA,
                   literal=frozenset({"fields", "offset", "limit", "max_bytes"}),
                   explicit_read=True)  # it bounds itself; placement must not preview it


def load(ref: Ref, ctx: ToolContext) -> Source:
    """The source behind `ref`, following recorded `$ref`s and placed-result summaries."""
    shown: Any = ref.key if isinstance(ref, Blob) and ref.key else envelope(ref)
    current: Ref = ref
    for _ in range(_FOLLOW):
        src = ctx.resolver.source(current)
        if isinstance(src, BytesSource):
            return _from_bytes(src, shown)
        nxt = _next_ref(src)
        if nxt is None:
            return _from_value(src, shown)
        current = nxt
        if isinstance(nxt, Blob) and nxt.key:
            shown = nxt.key
    raise ToolRefusal(
        f"The reference {shown!r} leads through more than {_FOLLOW} stored references; pass the "
        "innermost art_… ref directly.", "bad-ref")


def _next_ref(value: Any) -> Ref | None:
    # A placed result records {"placed": true, "value": {"$ref": Blob}}; a result may also record
    # a bare envelope. Both stand for the data the model meant.
    if isinstance(value, dict) and value.get("placed") is True and is_envelope(value.get("value")):
        value = value["value"]
    if is_envelope(value):
        try:
            parsed = parse_model_envelope(value)
        except RefRefusal:
            return None
        return parsed if isinstance(parsed, Blob | MessageRef) else None
    return None


class _Media(Exception):
    """The ref leads to an image or audio: answered by reference, not decoded as records."""

    def __init__(self, meta: ArtifactMeta, where: str) -> None:
        super().__init__(where)
        self.meta, self.where = meta, where


def _media_answer(media: _Media, limit: int) -> dict[str, Any]:
    meta = media.meta
    if meta.bytes > limit:
        where = media.where[:1].upper() + media.where[1:]
        raise ToolRefusal(
            f"{where} is {meta.media_type!r} ({meta.bytes:,} bytes), over this read's "
            f"limit of {limit:,} bytes; it was not read. Show it on screen with present, or pass "
            "its ref to a tool that takes that kind of file.", "not-readable")
    kind = "image" if is_image(meta.media_type) else "audio"
    return {"delivered": kind, "ref": meta.ref, "mediaType": meta.media_type,
            "bytes": meta.bytes, "note": f"The {kind} itself is delivered as {kind} content "
            "beside this answer."}


def _from_bytes(src: BytesSource, shown: Any) -> Source:
    meta = src.meta
    if is_image(meta.media_type) or is_audio(meta.media_type):
        raise _Media(meta, src.where)
    version = ResultVersion.from_meta(meta)
    try:
        artifact = src.store.get(src.scope, meta.ref)
    except ArtifactIntegrityError as exc:
        raise ToolRefusal(f"{src.where} failed its integrity check and was not read: {exc}",
                          "integrity") from exc
    if artifact is None:
        raise ToolRefusal(
            f"Artifact {meta.ref!r} is no longer available (expired or deleted). It was not "
            "refetched: call the tool that produced it again for a new version.", "gone")
    data = artifact.data
    if is_json_lines(meta.media_type):
        return Source(items=json_lines_items(data), ref=shown, kind=meta.kind, version=version)
    octets = base(meta.media_type) == "application/octet-stream"
    if is_json(meta.media_type) or octets:
        try:
            return _from_value(decode(data), shown, kind=meta.kind, version=version)
        except Exception:
            if not octets:
                raise ToolRefusal(f"{src.where} is labelled {meta.media_type!r} but is not valid "
                                  "JSON; nothing was read.", "parse-error") from None
    if is_text(meta.media_type):  # text/*, XML, YAML, CSV… (JSON was parsed above)
        return Source(text=data.decode("utf-8", errors="replace"), ref=shown, kind=meta.kind,
                      version=version)
    raise ToolRefusal(
        f"{src.where} holds {meta.media_type!r} ({meta.bytes:,} bytes), which read_result does "
        "not decode; pass its ref to a tool that takes that kind of file (for example "
        "run_python or present).", "not-readable")


def _from_value(value: Any, shown: Any, *, kind: str | None = None,
                version: ResultVersion | None = None) -> Source:
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    path, rows = records_of(value)
    if rows is None:
        return Source(text=value, ref=shown, kind=kind, version=version)
    return Source(items=[Item(r) for r in rows], records_at=path, ref=shown, kind=kind,
                  version=version)


read_result: Tool = make_read_result()
