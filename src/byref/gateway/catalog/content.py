"""What reaches the client's screen and the model's eyes beside the text of a result.

Owns the content a `tools/call` answer carries besides the rendered text: an upstream's images and
audio up to the size dial (`byref.inlineMediaBytes`), its `resource_link`s and small embedded text
resources, its `structuredContent`; and the image or audio that byref's own `present` and
`read_result` deliver from the store. The law: every upstream block keeps its type and its place —
a text block is its recorded rendering (a stored block's marker or placed substitute, with its
ref, so the model can route what it sees), an image or audio passed follows its marker there, a
resource or link passed is itself there; the result's ref line is the last text block. Blocks
pass byte for byte, only when the result was not placed whole (its substitute stands for all of
it), never in place of a placed block, and never on an error; a stored artifact is read only in
the caller's scope, within the dial (present) or the explicit-read limit (read_result, which
refuses a larger one itself).

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

from byref.gateway.catalog.convert import INLINE_TEXT_RESOURCE_BYTES, answer_texts
from byref.gateway.config.file import INLINE_MEDIA_BYTES
from byref.store import ArtifactStore, Scope
from byref.tools.readers.present import PRESENT_TOOL_NAME
from byref.tools.readers.read_result import READ_RESULT_NAME
from byref.transcript import Part

KEPT_CALLS = 256
"""Calls whose extras wait for their answer to be built (an answer takes them at once)."""
_MEDIA = ("image/", "audio/")


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
        (nothing when it is one text block and no more; the oldest dropped past KEPT_CALLS)."""
        extras = Extras(blocks=passed_blocks(result, self.inline_media_bytes),
                        structured=result.structured_content, count=len(result.content))
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


def is_placed(part: Part) -> bool:
    """Whether a result part is a placement (the result was stored, not inserted)."""
    return is_placed_value(part.value)


async def client_result(passed: Passed, store: ArtifactStore, scope: Scope,
                        part: Part) -> types.CallToolResult:
    """The client's answer for one recorded result part (the caller's scope reads its media)."""
    rich = await answer_extras(passed, store, scope, part)
    if rich is None:
        texts, line = answer_texts(part)
        content: list[types.ContentBlock] = [_text(t) for t in texts]
        if line is not None:
            content.append(_text(line))
        return types.CallToolResult(content=content, is_error=part.is_error)
    content, structured = rich
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


async def answer_extras(passed: Passed, store: ArtifactStore, scope: Scope, part: Part
                        ) -> tuple[list[types.ContentBlock], Any] | None:
    """The whole content and structuredContent of a rich answer, or None when the answer is
    the plain one (`convert.call_result`: an error, or one text block and nothing passed or
    delivered). Takes the call's kept extras (`Passed.take`): ask once per answer."""
    extras = passed.take(part.call_id)
    if part.is_error:
        return None
    structured = None
    kept: dict[int, types.ContentBlock] = {}
    count = 1
    if extras is not None and not is_placed(part):
        kept, structured, count = extras.blocks, extras.structured, extras.count
    stored = _stored_media(part, passed.inline_media_bytes)
    found = None
    if stored is not None:
        found = await anyio.to_thread.run_sync(_read_media, store, scope, *stored)
    if not kept and structured is None and found is None and count <= 1:
        return None
    texts, line = answer_texts(part, count)
    values = part.value if len(texts) > 1 else [part.value]
    content: list[types.ContentBlock] = []
    for i, text in enumerate(texts):
        original = kept.get(i)
        if original is None or is_placed_value(values[i]):
            content.append(_text(text))  # a placed block's substitute stands for it
        elif isinstance(original, types.ImageContent | types.AudioContent):
            content.extend((_text(text), original))  # its marker (the ref), then itself
        else:
            content.append(original)  # a resource or a link: itself, in its place
    if found is not None:
        content.append(found)
    if line is not None:
        content.append(_text(line))
    return content, structured


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def is_placed_value(value: Any) -> bool:
    """Whether a recorded value is a placement's substitute."""
    return isinstance(value, dict) and value.get("placed") is True


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
