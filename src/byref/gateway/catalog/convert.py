"""The edge: MCP types in, byref values out. The client's answer is `edge.answer`'s.

Owns two conversions. (1) An upstream `tools/list` entry becomes a catalog name and a listing
(`<server>__<tool>`, so names are unique across servers and stable whatever other servers list),
and a byref declaration becomes an MCP `Tool`; (2) an upstream `CallToolResult` becomes the value
dispatch records: a text block is the exact string the server sent (never parsed, even when it
looks like JSON), every binary block (image, audio, embedded blob) and every embedded text
resource over `INLINE_TEXT_RESOURCE_BYTES` becomes a `Payload`, so it is stored and the model sees
a marker with its ref, and a small embedded text resource is kept inline (`{"type": "resource",
"uri", "mimeType", "text"}`) — each block by `tools.mcp_content`, the library's conversion too;
what passes to the client beside the text (images, links, structuredContent) is `content`'s;
several blocks are `Blocks`, one value each, in order; a SEP-2631 `FileValue` with inline
bytes (a `data:` URI) in structuredContent becomes one more `Payload` after them.

The law: nothing is lost in conversion that a tool would need later — text is kept byte for byte
(what the model sees, what a ref resolves to and what an edit must match are the server's own
characters; JSON in it is parsed on demand by read_json / query_json, never by replacing it),
binary bytes go to the store whole, an upstream error stays an error.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import mcp_types as types

from byref.discovery.catalog.mcp import Listed, access_of, parse_listing, safe_name, server_slug
from byref.gateway.catalog.metadata import declared_metadata
from byref.tools import Blocks, Payload
from byref.tools.mcp_content import INLINE_TEXT_RESOURCE_BYTES as INLINE_TEXT_RESOURCE_BYTES
from byref.tools.mcp_content import block_value

NAME_MAX = 64
"""Providers reject longer tool names; longer qualified names are shortened with a digest."""


# -- names and listings ---------------------------------------------------------------------------
def qualified_name(server: str, tool: str) -> str:
    """`<server>__<tool>`, provider-safe, at most 64 characters, the same on every run."""
    name = safe_name(f"{server_slug(server)}__{tool}")
    if len(name) <= NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:NAME_MAX - 9]}_{digest}"


def distinct_name(server: str, tool: str) -> str:
    """The name for a tool whose qualified name another server's tool already has.

    `<server>__<tool>` is a joined key: servers 'a-b' and 'a_b' slug alike, and server 'a' with
    tool 'b__c' joins like server 'a__b' with tool 'c'. The digest is of the pair itself.
    """
    pair = json.dumps([server, tool], ensure_ascii=False).encode()
    base = safe_name(f"{server_slug(server)}__{tool}")[:NAME_MAX - 9]
    return f"{base}_{hashlib.sha256(pair).hexdigest()[:8]}"


def listing(server: str, tools: list[types.Tool]) -> list[Listed]:
    """An upstream's `tools/list` answer in the shape the discovery catalog reads."""
    raw = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
    return parse_listing(raw, server=server, where=f"server {server!r}")


def capability(server: str, listed: Listed) -> str:
    """The capability label of a listed tool: `<server slug>:<access>` (read, write, ... from its
    name and annotations)."""
    return f"{server_slug(server)}:{access_of(listed.name, listed.annotations)}"


def mcp_tool(declaration: dict[str, Any], *, title: str | None = None) -> types.Tool:
    """A byref declaration (`name`, `description`, `input_schema`, and for a proxied tool `mcp`:
    its server's title, annotations, icons and `_meta`) as the client sees it.

    No `outputSchema`: the gateway may always answer with a substitute (a placed preview, a
    marker), which a client holding the upstream's output schema would reject.
    """
    meta = declared_metadata(declaration["name"], declaration.get("mcp"))
    return types.Tool.model_validate({
        "name": declaration["name"], "description": declaration["description"],
        "inputSchema": declaration["input_schema"], **meta,
        **({"title": title} if title is not None else {})})


# -- upstream results → values --------------------------------------------------------------------
def result_value(result: types.CallToolResult, *, server: str, tool: str) -> Any:
    """What an upstream call returned, as the value byref records (Payloads for binary, and for
    each SEP-2631 `FileValue` with inline bytes in its structuredContent)."""
    label = f"{server}.{tool}"
    values = [block_value(block, label) for block in result.content]
    values += file_outputs(result.structured_content)
    if not values:
        return result.structured_content if result.structured_content is not None else ""
    return values[0] if len(values) == 1 else Blocks(tuple(values))


_FILES_DEPTH, _FILES_MAX = 8, 32


def file_outputs(structured: Any) -> list[Payload]:
    """Each SEP-2631 `FileValue` in a result's structuredContent whose `uri` is an RFC 2397
    `data:` URI (base64), as a Payload of its bytes — kept only when they match its declared
    `size` and sha-256 `digest` (a `mcp-file://` handle of the upstream's own stays as sent)."""
    found: list[Payload] = []

    def walk(value: Any, depth: int) -> None:
        if depth > _FILES_DEPTH or len(found) >= _FILES_MAX:
            return
        if isinstance(value, dict):
            payload = _inline_file(value)
            if payload is not None:
                found.append(payload)
                return
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, depth + 1)

    walk(structured, 0)
    return found


def _inline_file(value: dict[str, Any]) -> Payload | None:
    uri = value.get("uri")
    if not (isinstance(uri, str) and uri.startswith("data:") and ("mimeType" in value
                                                                   or "size" in value)):
        return None
    head, _, body = uri.partition(",")
    if not head.endswith(";base64"):
        return None
    try:
        data = base64.b64decode(body, validate=True)
    except ValueError:
        return None
    size, digest = value.get("size"), value.get("digest")
    if isinstance(size, int) and size != len(data):
        return None
    if isinstance(digest, dict) and digest.get("algorithm") == "sha-256":
        raw = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
        if digest.get("value") != raw:
            return None
    media = value.get("mimeType") or head[5:].split(";")[0] or "application/octet-stream"
    name = value.get("name")
    return Payload.from_bytes(data, str(media), label=name if isinstance(name, str) else None)


def error_text(result: types.CallToolResult) -> str:
    """The words of an upstream's error result (its text blocks, joined)."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    return "\n".join(texts).strip() or "(the server gave no message)"


def error_content(result: types.CallToolResult) -> str | None:
    """An upstream's error result as its ref passes it on: its one text block as sent (several
    joined by newlines), or None when it has no text."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    return "\n".join(texts) if texts else None
