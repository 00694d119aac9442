"""What an upstream result carries besides the value dispatch records, kept for its answer.

Owns `Passed`: per call, the upstream's images and audio up to the size dial
(`byref.inlineMediaBytes`), its `resource_link`s and small embedded text resources (by their place
in its answer), its `structuredContent` and how many blocks it had, until the client's answer
(`edge.answer`) takes them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from byref.gateway.catalog.convert import INLINE_TEXT_RESOURCE_BYTES, file_outputs
from byref.gateway.config.file import INLINE_MEDIA_BYTES

KEPT_CALLS = 256
"""Calls whose extras wait for their answer to be built (an answer takes them at once)."""


@dataclass
class Extras:
    """What one upstream result carries besides the value dispatch records: its blocks that pass
    as they are (by their place in its answer), its structuredContent, how many blocks it had."""

    blocks: dict[int, types.ContentBlock] = field(default_factory=dict)
    structured: Any = None
    count: int = 1


class Passed:
    """Call id → the upstream's extras, until the client's answer for that call is built.

    Bounded: a call whose answer is never built (run outside a client request) is forgotten
    after `KEPT_CALLS` others.
    """

    def __init__(self, inline_media_bytes: int = INLINE_MEDIA_BYTES) -> None:
        self.inline_media_bytes = inline_media_bytes
        self._extras: OrderedDict[str, Extras] = OrderedDict()

    def keep(self, call_id: str, result: types.CallToolResult) -> None:
        """Keep a result's images, links, structuredContent and block count for `call_id`
        (nothing when it is one text block and no more; the oldest dropped past KEPT_CALLS). A
        structuredContent holding inline SEP-2631 files (`convert.file_outputs`, stored as Blob
        refs) is not kept: the refs stand for it."""
        structured = result.structured_content
        if file_outputs(structured):  # its inline files are stored: not sent again whole
            structured = None
        extras = Extras(blocks=passed_blocks(result, self.inline_media_bytes),
                        structured=structured, count=len(result.content))
        if not extras.blocks and extras.structured is None and extras.count <= 1:
            return
        self._extras[call_id] = extras
        while len(self._extras) > KEPT_CALLS:
            self._extras.popitem(last=False)

    def take(self, call_id: str | None) -> Extras | None:
        """The extras kept for `call_id`, removed, or None."""
        return None if call_id is None else self._extras.pop(call_id, None)


def passed_blocks(result: types.CallToolResult,
                  inline_media_bytes: int) -> dict[int, types.ContentBlock]:
    """The upstream's blocks that pass to the client as they are, by their place."""
    out: dict[int, types.ContentBlock] = {}
    for i, block in enumerate(result.content):
        if isinstance(block, types.ImageContent | types.AudioContent):
            if _decoded_size(block.data) <= inline_media_bytes:
                out[i] = block
        elif isinstance(block, types.ResourceLink) or (
                isinstance(block, types.EmbeddedResource) and is_small_text(block)):
            out[i] = block
    return out


def is_small_text(block: types.EmbeddedResource) -> bool:
    """Whether an embedded resource is text small enough to inline (INLINE_TEXT_RESOURCE_BYTES)."""
    res = block.resource
    return isinstance(res, types.TextResourceContents) and len(
        res.text.encode()) <= INLINE_TEXT_RESOURCE_BYTES


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4
