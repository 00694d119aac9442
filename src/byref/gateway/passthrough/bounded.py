"""A resources/read answer bounded: contents past `READ_BYTES` go as pages of a stored artifact.

Owns the bound and the page URIs. The law: no read answer carries more than `READ_BYTES` of
content (text as UTF-8, a blob decoded; base64 makes it a third more on the wire). A larger one
is answered by a short text naming each part's size and its pages — the artifact the part is
(byref's own) or was stored as (an upstream's, in the caller's scope) — and each page,
`byref:artifact/<ref>?page=N` (1 to `pages`), is read on its own: `READ_BYTES` at most, a text
page cut before a character so each page decodes alone. A page past the last is refused, saying
how many there are.
"""

from __future__ import annotations

import base64
import math

import mcp_types as types
from mcp.shared.exceptions import MCPError

from byref.gateway.passthrough.uris import ARTIFACT_PREFIX
from byref.refs import quote
from byref.store import ArtifactMeta

READ_BYTES = 4 * 1024 * 1024
"""The most content bytes one resources/read answers (the same dial as inline media)."""
PAGE = "?page="


def split_page(ref: str) -> tuple[str, int | None]:
    """`art_…?page=N` → (`art_…`, N); without a page, (`ref`, None); raises MCPError for a page
    that is not a positive integer."""
    ref, sep, page = ref.partition(PAGE)
    if not sep:
        return ref, None
    if not page.isdigit() or int(page) < 1:
        raise MCPError(types.INVALID_PARAMS, (
            f"Page {quote(page)} of artifact {quote(ref)} is not a page number: pass "
            f"{PAGE}1 for the first."))
    return ref, int(page)


def size_of(contents: list[types.TextResourceContents | types.BlobResourceContents]) -> int:
    """The content bytes `contents` hold (text as UTF-8, blobs decoded; estimated from the
    base64 length, never decoded)."""
    total = 0
    for part in contents:
        if isinstance(part, types.TextResourceContents):
            total += len(part.text.encode("utf-8", "surrogatepass"))
        else:
            total += len(part.blob) * 3 // 4
    return total


def data_of(part: types.TextResourceContents | types.BlobResourceContents) -> bytes:
    """A part's bytes (text as UTF-8)."""
    if isinstance(part, types.TextResourceContents):
        return part.text.encode("utf-8", "surrogatepass")
    return base64.b64decode(part.blob)


def pages(size: int) -> int:
    """How many pages `size` bytes take (one at least)."""
    return max(1, math.ceil(size / READ_BYTES))


def page_uri(ref: str, page: int) -> str:
    """The URI of page `page` of artifact `ref`."""
    return f"{ARTIFACT_PREFIX}{ref}{PAGE}{page}"


def index(asked: str, parts: list[tuple[str, ArtifactMeta]]) -> types.ReadResourceResult:
    """The answer to a read too large to send: each part (its URI, the artifact holding it)
    by size and pages."""
    lines = [f"{quote(asked)} is {sum(m.bytes for _, m in parts):,} bytes, past the "
             f"{READ_BYTES:,} one read answers; read it by pages:"]
    listed = []
    for uri, meta in parts:
        n = pages(meta.bytes)
        lines.append(f"- {quote(uri)} ({meta.media_type}, {meta.bytes:,} bytes): "
                     f"{page_uri(meta.ref, 1)} to {page_uri(meta.ref, n)}")
        listed.append({"uri": uri, "ref": meta.ref, "mimeType": meta.media_type,
                       "bytes": meta.bytes, "pages": n, "first": page_uri(meta.ref, 1)})
    text = types.TextResourceContents(uri=asked, mime_type="text/plain", text="\n".join(lines))
    return types.ReadResourceResult(contents=[text], _meta={"byref/pages": listed})


def cut(data: bytes, page: int, text: bool) -> bytes:
    """Page `page` (1-based) of `data`: `READ_BYTES` at most, a text page's ends moved back to
    the start of a character. Raises MCPError past the last page."""
    last = pages(len(data))
    if page > last:
        raise MCPError(types.INVALID_PARAMS, (
            f"Page {page} is past the last: this artifact has {last} "
            f"page{'s' if last != 1 else ''} ({PAGE}1 to {PAGE}{last})."))
    return data[_boundary(data, page - 1, text):_boundary(data, page, text)]


def _boundary(data: bytes, page: int, text: bool) -> int:
    at = min(page * READ_BYTES, len(data))
    while text and 0 < at < len(data) and data[at] & 0xC0 == 0x80:  # a UTF-8 continuation
        at -= 1
    return at
