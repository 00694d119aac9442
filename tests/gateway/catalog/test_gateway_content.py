"""Content reaches the screen and the model: images and audio pass as image/audio content with a ref
beside them (larger ones only stored), small embedded text resources inline, resource_link as
resource_link, structuredContent when the result is not placed; `present` and `read_result` of a
stored image answer with the image. Driven by the official client against a fixture server built on
the official SDK (fixtures/media_server.py), in this process over the SDK's in-memory transport;
the first case runs over the server's own process (stdio) too, byref's raw call path."""

from __future__ import annotations

import base64
import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types as types
import pytest
from _gateway_rig import OVER, fixtures_gateway, ref_line_of
from mcp import Client

from _waits import scaled
from byref.gateway import Gateway
from byref.gateway.catalog.convert import INLINE_TEXT_RESOURCE_BYTES
from byref.gateway.catalog.metadata import GATEWAY_EXPLICIT_READ_BYTES as EXPLICIT_READ_BYTES
from byref.gateway.config.file import INLINE_MEDIA_BYTES
from byref.gateway.edge.server import GatewayServer

pytestmark = pytest.mark.anyio
PNG = b"\x89PNG\r\n\x1a\n"


def _media(request: pytest.FixtureRequest | None = None,
           **options: Any) -> AbstractAsyncContextManager[tuple[Gateway, GatewayServer]]:
    return fixtures_gateway(request, {"media": "media_server.py"}, **options)


def _png(size: int) -> bytes:
    return PNG + bytes((i * 7 + 3) % 256 for i in range(size - len(PNG)))


def _blob(key: str) -> dict[str, Any]:
    return {"$ref": {"type": "Blob", "key": key}}


def _text(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


async def _call(client: Client, tool: str, **arguments: Any) -> types.CallToolResult:
    result = await client.call_tool("call_tool", {"name": f"media__{tool}",
                                                  "arguments": arguments})
    assert not result.is_error, result.content
    return result


def test_the_default_dial_holds_a_typical_screenshot() -> None:
    assert INLINE_MEDIA_BYTES >= 3 * 1024 * 1024  # a full-HD PNG screenshot is 0.2-3 MB


@pytest.mark.parametrize("over", OVER)
async def test_an_image_passes_as_image_content_with_its_ref_beside_it(
        over: str, request: pytest.FixtureRequest) -> None:
    with anyio.fail_after(scaled(60)):
        async with _media(request) as (gateway, server), Client(
                server) as client:
            result = await _call(client, "screenshot", size=5000)
            # Each block in its place: the caption, the image's marker (its ref) and the image
            # itself, then the result's ref line.
            assert [b.type for b in result.content] == ["text", "text", "image", "text"]
            image = result.content[2]
            assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
            assert base64.b64decode(image.data) == _png(5000)
            assert _text(result) == "screenshot of 5000 bytes"
            marker = json.loads(result.content[1].text)  # type: ignore[union-attr]
            assert ref_line_of(result) is not None
            assert marker["opaque"] is True and marker["mediaType"] == "image/png"
            assert marker["bytes"] == 5000
            ref = marker["value"]["$ref"]["key"]
            stored = gateway.store.get(gateway.scopes.stdio_owner, ref)
            assert stored is not None and stored.data == _png(5000)  # routable by its ref

            shown = await client.call_tool("present", {"ref": ref, "as": "image"})
            assert not shown.is_error, shown.content
            assert [b.type for b in shown.content] == ["text", "image"]
            assert json.loads(_text(shown))["presented"] == ref
            assert base64.b64decode(shown.content[1].data) == _png(5000)  # type: ignore[union-attr]

            read = await client.call_tool("read_result", {"ref": _blob(ref)})
            assert not read.is_error, read.content
            assert json.loads(_text(read)) == {
                "delivered": "image", "ref": ref, "mediaType": "image/png", "bytes": 5000,
                "note": "The image itself is delivered as image content beside this answer."}
            assert base64.b64decode(read.content[1].data) == _png(5000)  # type: ignore[union-attr]


async def test_an_image_over_the_dial_is_stored_and_shown_as_its_marker_only() -> None:
    with anyio.fail_after(scaled(60)):
        async with _media(inlineMediaBytes=4000) as (
                _gateway, server), Client(server) as client:
            small = await _call(client, "screenshot", size=3000)
            assert [b.type for b in small.content] == ["text", "text", "image", "text"]
            large = await _call(client, "screenshot", size=6000)
            assert [b.type for b in large.content] == ["text", "text", "text"]
            marker = json.loads(large.content[1].text)  # type: ignore[union-attr]
            ref = marker["value"]["$ref"]["key"]
            shown = await client.call_tool("present", {"ref": ref, "as": "image"})
            assert [b.type for b in shown.content] == ["text"]  # presented, not sent inline


async def test_read_result_of_an_image_is_bounded_by_the_explicit_read_limit() -> None:
    size = EXPLICIT_READ_BYTES + 1000
    with anyio.fail_after(scaled(60)):
        async with _media() as (_gateway, server), Client(
                server) as client:
            big = await _call(client, "screenshot", size=size)
            ref = json.loads(big.content[1].text)["value"]["$ref"]["key"]  # type: ignore[union-attr]
            read = await client.call_tool("read_result", {"ref": _blob(ref)})
            assert read.is_error
            assert _text(read) == (
                f"Artifact {ref!r} is 'image/png' ({size:,} bytes), over this read's limit of "
                f"{EXPLICIT_READ_BYTES:,} bytes; it was not read. Show it on screen with "
                "present, or pass its ref to a tool that takes that kind of file.")
            smaller = await client.call_tool("read_result", {"ref": _blob(ref),
                                                             "max_bytes": 100})
            assert smaller.is_error and "over this read's limit of 100 bytes" in _text(smaller)


async def test_audio_links_and_embedded_text_pass_through() -> None:
    with anyio.fail_after(scaled(60)):
        async with _media() as (_gateway, server), Client(
                server) as client:
            beep = await _call(client, "beep")
            assert [b.type for b in beep.content] == ["text", "audio"]  # its marker is its ref
            assert json.loads(_text(beep))["mediaType"] == "audio/wav"

            link = await _call(client, "link")
            # A link or a resource is itself in its place (its text is in it), then the ref line.
            assert [b.type for b in link.content] == ["resource_link", "text"]
            assert link.content[0].uri == "memo://note"  # type: ignore[union-attr]
            assert ref_line_of(link) is not None

            note = await _call(client, "note")
            assert [b.type for b in note.content] == ["resource", "text"]
            embedded = note.content[0]
            assert isinstance(embedded, types.EmbeddedResource)
            assert embedded.resource.uri == "memo://note"
            assert embedded.resource.text == "remember the milk"  # type: ignore[union-attr]

            long = await _call(client, "long_note")
            assert len("line of the long note\n" * 400) > INLINE_TEXT_RESOURCE_BYTES
            assert [b.type for b in long.content] == ["text"]
            assert json.loads(_text(long))["opaque"] is True  # stored, a marker shown


async def test_structured_content_passes_unless_the_result_is_placed() -> None:
    with anyio.fail_after(scaled(60)):
        async with _media() as (_gateway, server), Client(
                server, mode="legacy") as client:  # its declared tools grow by activation
            weather = await _call(client, "weather", city="Oslo")
            assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
            assert json.loads(_text(weather)) == {"city": "Oslo", "celsius": 21.5}

            big = await _call(client, "big_weather")
            assert json.loads(_text(big))["placed"] is True
            assert big.structured_content is None  # the substitute stands for all of it

            activated = await client.call_tool("activate_tool", {"names": ["media__weather"]})
            assert not activated.is_error
            declared = {t.name: t for t in (await client.list_tools()).tools}
            # No outputSchema: a placed answer has no structuredContent to conform.
            assert declared["media__weather"].output_schema is None


async def test_an_upstream_error_passes_no_content_beside_its_words() -> None:
    with anyio.fail_after(scaled(60)):
        async with _media() as (_gateway, server), Client(
                server) as client:
            bad = await client.call_tool("call_tool", {"name": "media__screenshot",
                                                       "arguments": {"size": "big"}})
            assert bad.is_error and [b.type for b in bad.content] == ["text"]
