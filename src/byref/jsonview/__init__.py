"""JSON views: bounded previews, shape hints, JSON Pointer and filters over values or streams.

Owns how a large JSON value is described without being shown. The law: a preview never exceeds
its character budget and always says what it hid (elided string lengths, hidden item and key
counts); selection over stored bytes streams with ijson's C backend, so a large blob is never
materialized whole; a selection that no longer matches raises `StaleSelectionError`, never
returns an empty or partial value.
"""

from byref.jsonview.codec import (
    JsonEncodeError,
    decode,
    dumps,
    encode,
    literal_value,
    unrecordable,
)
from byref.jsonview.preview import DEFAULT_PREVIEW_CHARS, bounded, preview, shape_hint
from byref.jsonview.select import (
    ChunkReader,
    NotJsonError,
    StaleSelectionError,
    matches,
    query_stream,
    query_value,
    resolve_pointer,
    stream_pointer,
)

__all__ = [
    "DEFAULT_PREVIEW_CHARS",
    "ChunkReader",
    "JsonEncodeError",
    "NotJsonError",
    "StaleSelectionError",
    "bounded",
    "decode",
    "dumps",
    "encode",
    "literal_value",
    "matches",
    "preview",
    "query_stream",
    "query_value",
    "resolve_pointer",
    "shape_hint",
    "stream_pointer",
    "unrecordable",
]
