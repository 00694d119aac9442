"""What reaches the client's screen and the model's eyes beside the text of a result.

Owns the content a `tools/call` answer carries besides the rendered text: an upstream's images and
audio up to the size dial (`byref.inlineMediaBytes`), its `resource_link`s and small embedded text
resources, its `structuredContent`; and the image or audio that byref's own `present` and
`read_result` deliver from the store. The law: the text block is always the rendering the
transcript records (a stored image's marker with its ref, so the model can route what it sees);
the blocks beside it are the upstream's own, byte for byte, and pass only when the result was not
placed (a placed result's substitute stands for all of it) and never on an error; a stored
artifact is read only in the caller's scope, within the dial (present) or the explicit-read limit
(read_result, which refuses a larger one itself).

outputSchema: not declared for proxied tools. A placed result carries no structuredContent, and a
client that holds the tool's output schema must then reject the answer; so the gateway passes
structuredContent whenever the result is not placed and declares no schema it cannot keep.
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
import mcp_types as types

from byref.gateway.catalog.convert import INLINE_TEXT_RESOURCE_BYTES, call_result
from byref.gateway.config.file import INLINE_MEDIA_BYTES
from byref.store import ArtifactStore, Scope
from byref.tools.present import PRESENT_TOOL_NAME
from byref.tools.read_result import READ_RESULT_NAME
from byref.transcript import Part

KEPT_CALLS = 256
"""Calls whose extras wait for their answer to be built (an answer takes them at once)."""
_MEDIA = ("image/", "audio/")


@dataclass
class Extras:
    """What one upstream result carries besides the value dispatch records."""

    blocks: list[types.ContentBlock] = field(default_factory=list)
    structured: Any = None


class Passed:
    """Call id → the upstream's extras, until the client's answer for that call is built.

    Bounded: a call whose answer is never built (run outside a client request) is forgotten
    after `KEPT_CALLS` others.
    """

    def __init__(self, inline_media_bytes: int = INLINE_MEDIA_BYTES) -> None:
        self.inline_media_bytes = inline_media_bytes
        self._extras: OrderedDict[str, Extras] = OrderedDict()

    def keep(self, call_id: str, result: types.CallToolResult) -> None:
        """Keep a result's images, links and structuredContent for `call_id` (nothing when it has
        none; the oldest dropped past KEPT_CALLS)."""
        extras = Extras(blocks=passed_blocks(result, self.inline_media_bytes),
                        structured=result.structured_content)
        if not extras.blocks and extras.structured is None:
            return
        self._extras[call_id] = extras
        while len(self._extras) > KEPT_CALLS:
            self._extras.popitem(last=False)

    def take(self, call_id: str | None) -> Extras | None:
        """The extras kept for `call_id`, removed, or None."""
        return None if call_id is None else self._extras.pop(call_id, None)


def passed_blocks(result: types.CallToolResult,
                  inline_media_bytes: int) -> list[types.ContentBlock]:
    """The upstream's blocks that pass to the client as they are (beside the rendered text)."""
    out: list[types.ContentBlock] = []
    for block in result.content:
        if isinstance(block, types.ImageContent | types.AudioContent):
            if _decoded_size(block.data) <= inline_media_bytes:
                out.append(block)
        elif isinstance(block, types.ResourceLink) or (
                isinstance(block, types.EmbeddedResource) and is_small_text(block)):
            out.append(block)
    return out


def is_small_text(block: types.EmbeddedResource) -> bool:
    """Whether an embedded resource is text small enough to inline (INLINE_TEXT_RESOURCE_BYTES)."""
    res = block.resource
    return isinstance(res, types.TextResourceContents) and len(
        res.text.encode()) <= INLINE_TEXT_RESOURCE_BYTES


def _decoded_size(data: str) -> int:
    return len(data) * 3 // 4


def is_placed(part: Part) -> bool:
    """Whether a result part is a placement (the result was stored, not inserted)."""
    return isinstance(part.value, dict) and part.value.get("placed") is True


async def client_result(passed: Passed, store: ArtifactStore, scope: Scope,
                        part: Part) -> types.CallToolResult:
    """The client's answer for one recorded result part (the caller's scope reads its media)."""
    base = call_result(part)
    beside = await answer_extras(passed, store, scope, part)
    if beside is None:
        return base
    blocks, structured = beside
    return types.CallToolResult(content=[*base.content, *blocks], structured_content=structured,
                                is_error=False)


async def answer_extras(passed: Passed, store: ArtifactStore, scope: Scope, part: Part
                        ) -> tuple[list[types.ContentBlock], Any] | None:
    """The blocks and structuredContent the client's answer carries beside the rendered text, or
    None when the answer is that text alone (an error, or nothing passed or delivered). Takes
    the call's kept extras (`Passed.take`): ask once per answer."""
    extras = passed.take(part.call_id)
    if part.is_error:
        return None
    blocks: list[types.ContentBlock] = []
    structured = None
    if extras is not None and not is_placed(part):
        blocks.extend(extras.blocks)
        structured = extras.structured
    stored = _stored_media(part, passed.inline_media_bytes)
    if stored is not None:
        found = await anyio.to_thread.run_sync(_read_media, store, scope, *stored)
        if found is not None:
            blocks.append(found)
    if not blocks and structured is None:
        return None
    return blocks, structured


def _stored_media(part: Part, dial: int) -> tuple[str, str] | None:
    """(artifact ref, media type) of the image or audio byref's own tool delivers, if any."""
    value = part.value
    if not isinstance(value, dict):
        return None
    if part.tool == PRESENT_TOOL_NAME:
        snap = value.get("snapshot") or {}
        ref, media, size = value.get("presented"), snap.get("mediaType"), snap.get("bytes")
        if not isinstance(size, int) or size > dial:
            return None  # presented all the same; too large to send inline
    elif part.tool == READ_RESULT_NAME and value.get("delivered") in ("image", "audio"):
        ref, media = value.get("ref"), value.get("mediaType")
    else:
        return None
    if isinstance(ref, str) and isinstance(media, str) and media.startswith(_MEDIA):
        return ref, media
    return None


def _read_media(store: ArtifactStore, scope: Scope, ref: str,
                media: str) -> types.ContentBlock | None:
    artifact = store.get(scope, ref)  # the caller's scope: another scope's key is absent
    if artifact is None:
        return None
    data = base64.b64encode(artifact.data).decode("ascii")
    if media.startswith("image/"):
        return types.ImageContent(type="image", data=data, mime_type=media)
    return types.AudioContent(type="audio", data=data, mime_type=media)
