"""A `tools/call` answer as the client receives it, shaped here alone for the SDK's path and both
lanes.

Owns the turn of a recorded result `Part` into the client's answer: the texts (one per recorded
block — the server's text byte for byte, or its marker or placed substitute — and last the
result's ref line as a text block of its own), the blocks that pass beside them (the upstream's
images, audio, links and small text resources kept by `catalog.content.Passed`, and the image or
audio that byref's own `present` and `read_result` deliver from the store), its
structuredContent, and that answer as wire JSON for the lanes. The law: every upstream block keeps
its type and its place — a text block is its recorded rendering, an image or audio passed follows
its marker there, a resource or link passed is itself there; the result's ref line is the last
text block. Blocks pass only when the result was not placed whole (its substitute stands for all
of it), never in place of a placed block, and never on an error; a stored artifact is read only
in the caller's scope, within the dial (present) or the explicit-read limit (read_result, which
refuses a larger one itself). A plain answer's wire JSON is the very JSON the SDK's sieve makes of
`call_result` (a test pins the two equal); a rich one goes through that sieve (`sieved`).

outputSchema: not declared for proxied tools. A placed result carries no structuredContent, and a
client that holds the tool's output schema must then reject the answer; so the gateway passes
structuredContent whenever the result is not placed and declares no schema it cannot keep.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp_types import methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.dispatch.outbound.reflines import split
from byref.dispatch.outbound.results import render
from byref.gateway.catalog.content import Passed
from byref.store import ArtifactStore, Scope
from byref.tools.readers.present import PRESENT_TOOL_NAME
from byref.tools.readers.read_result import READ_RESULT_NAME
from byref.transcript import Part

_MEDIA = ("image/", "audio/")


# -- the texts ------------------------------------------------------------------------------------
def shown_text(part: Part) -> str:
    """The text the model is shown for a result part (its rendering)."""
    return part.rendered if part.rendered is not None else str(part.value)


def answer_texts(part: Part, blocks: int = 1) -> tuple[list[str], str | None]:
    """The texts of the client's answer for a part, one a block, and its ref line (or None).

    `blocks`: how many blocks the upstream answered with; a result of several that was recorded
    block by block (not placed whole, not an error) answers one text per block, each its own
    rendering, else the rendering is one text.
    """
    text = shown_text(part)
    body, line = split(text)
    if part.is_error:  # one text, and the ref line of an error carrying the tool's own words
        return [body], line
    value = part.value
    if blocks > 1 and isinstance(value, list) and len(value) == blocks:
        return [render(v) for v in value], line
    return [body], line


# -- the plain answer -----------------------------------------------------------------------------
def call_result(part: Part) -> types.CallToolResult:
    """What the client receives for a one-block result: the text the model is shown, its ref
    line as a block of its own, and whether it is an error."""
    texts, line = answer_texts(part)
    if line is not None:
        texts.append(line)
    return types.CallToolResult(content=[_text(t) for t in texts], is_error=part.is_error)


def call_result_wire(part: Part) -> dict[str, Any]:
    """`call_result(part)` as the handshake-era JSON the SDK's result sieve makes of it (no model
    built, validated and dumped again per call; a test pins the two equal)."""
    texts, line = answer_texts(part)
    content = [{"type": "text", "text": texts[0]}]
    if line is not None:
        content.append({"type": "text", "text": line})
    return {"content": content, "isError": part.is_error}


# -- the rich answer ------------------------------------------------------------------------------
def is_placed(part: Part) -> bool:
    """Whether a result part is a placement (the result was stored, not inserted)."""
    return is_placed_value(part.value)


def is_placed_value(value: Any) -> bool:
    """Whether a recorded value is a placement's substitute."""
    return isinstance(value, dict) and value.get("placed") is True


async def answer_extras(passed: Passed, store: ArtifactStore, scope: Scope, part: Part
                        ) -> tuple[list[types.ContentBlock], Any] | None:
    """The whole content and structuredContent of a rich answer, or None when the answer is
    the plain one (`call_result`: an error, or one text block and nothing passed or
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


# -- the answer, by path --------------------------------------------------------------------------
async def client_result(passed: Passed, store: ArtifactStore, scope: Scope,
                        part: Part) -> types.CallToolResult:
    """The SDK path's answer for one recorded result part (the caller's scope reads its media)."""
    rich = await answer_extras(passed, store, scope, part)
    if rich is None:
        return call_result(part)
    content, structured = rich
    return types.CallToolResult(content=content, structured_content=structured, is_error=False)


def wire_answer(part: Part, rich: tuple[list[types.ContentBlock], Any] | None, version: str,
                server: Server[Any]) -> dict[str, Any]:
    """The lanes' answer: the wire JSON of the SDK path's answer for `part` (`rich`: what
    `answer_extras` found) at protocol `version`, as `server`'s runner stamps it."""
    if rich is None:
        out = call_result_wire(part)
        if version in MODERN_PROTOCOL_VERSIONS:
            out["resultType"] = "complete"
            out["_meta"] = {types.SERVER_INFO_META_KEY: server.server_info_stamp}
        return out
    content, structured = rich  # a rich answer: shaped by the SDK's own sieve, as the handler's
    return sieved(types.CallToolResult(content=content, structured_content=structured,
                                       is_error=False), version, server)


def sieved(result: types.CallToolResult, version: str, server: Server[Any]) -> dict[str, Any]:
    """`result` as the SDK's runner answers it at `version`: dumped, passed through the SDK's
    result sieve, and a 2026-07-28 one stamped with the server's info."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    modern = version in MODERN_PROTOCOL_VERSIONS
    if modern:
        dumped["resultType"] = "complete"
    out = methods.serialize_server_result("tools/call", version, dumped)
    if modern:  # the 2026-07-28 serverInfo stamp the runner puts on every result
        out["_meta"] = {types.SERVER_INFO_META_KEY: server.server_info_stamp}
    return out


# -- helpers --------------------------------------------------------------------------------------
def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


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
