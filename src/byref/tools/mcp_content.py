"""An MCP tool result's content block as the value byref records: one conversion, for the
library's `McpSource` and the gateway (`gateway.catalog.convert`).

A text block is the exact string the server sent (never parsed); an image, audio or embedded blob
is a `Payload` of its decoded bytes (stored; the model sees a marker with its ref); an embedded
text resource up to `INLINE_TEXT_RESOURCE_BYTES` stays inline (`{"type": "resource", "uri",
"mimeType", "text"}`), a larger one is a `Payload`; a resource link is a small dict. Blocks are read
by their fields in either spelling (the official SDK's models, FastMCP's, camelCase), never by
class, so the `mcp` extra is not needed to import this. The law: nothing a later tool would need is
lost — text byte for byte, binary bytes whole.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from byref.tools.payload import Payload

INLINE_TEXT_RESOURCE_BYTES = 4 * 1024
"""An embedded text resource up to this size is kept inline (its text in the result, the block
passed on to the client); a larger one is stored and shown as a marker."""


def block_value(block: Any, label: str) -> Any:
    """The value of one content block of a result of `label` (`server.tool`, for messages)."""
    kind = _get(block, "type")
    if kind == "text":
        return str(_get(block, "text"))
    if kind in ("image", "audio"):
        media = str(_get(block, "mime_type", "mimeType"))
        return Payload.from_bytes(_b64(_get(block, "data"), label), media, kind=media,
                                  label=f"{label} {kind}")
    if kind == "resource":
        res = _get(block, "resource")
        uri, media = str(_get(res, "uri")), _get(res, "mime_type", "mimeType")
        text = _get(res, "text")
        if isinstance(text, str) and len(text.encode()) <= INLINE_TEXT_RESOURCE_BYTES:
            inline: dict[str, Any] = {"type": "resource", "uri": uri}
            if media:
                inline["mimeType"] = media
            inline["text"] = text
            return inline
        if isinstance(text, str):
            data, media = text.encode(), media or "text/plain"
        else:
            data, media = _b64(_get(res, "blob"), label), media or "application/octet-stream"
        return Payload.from_bytes(data, media, kind=media, label=f"{label} {uri}")
    if kind == "resource_link":
        link: dict[str, Any] = {"type": "resource_link", "uri": str(_get(block, "uri")),
                                "name": _get(block, "name")}
        media, size = _get(block, "mime_type", "mimeType"), _get(block, "size")
        if media:
            link["mimeType"] = media
        if size is not None:
            link["size"] = size
        return link
    dump = getattr(block, "model_dump", None)  # a block kind newer than this conversion
    return dump(by_alias=True, mode="json", exclude_none=True) if dump else block


def _get(obj: Any, name: str, camel: str | None = None) -> Any:
    """`obj`'s field `name` (or its camelCase spelling), as attribute or key; None if absent."""
    for key in (name, camel) if camel else (name,):
        if isinstance(obj, dict):
            if key in obj:
                return obj[key]
        elif hasattr(obj, key):
            return getattr(obj, key)
    return None


def _b64(data: Any, label: str) -> bytes:
    try:
        return base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{label} returned binary content that is not valid base64") from exc
