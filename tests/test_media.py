"""`byref.media`: one answer per media type, parameters and case ignored, in every layer."""

from __future__ import annotations

import asyncio
import re

import pytest

import byref
from byref import media
from byref.refs import KEY_PATTERN
from byref.tools import Payload


@pytest.mark.parametrize(("mt", "json", "lines", "text", "image", "audio"), [
    ("application/json", True, False, True, False, False),
    ("Application/JSON; charset=utf-8", True, False, True, False, False),
    ("application/vnd.api+json", True, False, True, False, False),
    ("application/x-ndjson", False, True, True, False, False),
    ("text/csv; charset=utf-8", False, False, True, False, False),
    ("application/xml", False, False, True, False, False),
    ("application/atom+xml", False, False, True, False, False),
    ("application/yaml", False, False, True, False, False),
    ("image/svg+xml", False, False, True, True, False),
    ("image/png", False, False, False, True, False),
    ("audio/wav", False, False, False, False, True),
    ("application/pdf", False, False, False, False, False),
    ("application/octet-stream", False, False, False, False, False),
    ("", False, False, False, False, False),
])
def test_each_check_answers_once_for_every_spelling(mt: str, json: bool, lines: bool, text: bool,
                                                    image: bool, audio: bool) -> None:
    assert (media.is_json(mt), media.is_json_lines(mt), media.is_text(mt), media.is_image(mt),
            media.is_audio(mt)) == (json, lines, text, image, audio)


def test_base_drops_parameters_and_case() -> None:
    assert media.base(" Text/CSV ; charset=utf-8") == "text/csv"
    assert media.is_plain_text("TEXT/plain") and not media.is_plain_text("application/json")


def test_read_result_reads_xml_as_text() -> None:
    @byref.tool
    def feed() -> Payload:
        """An XML feed (a stored binary of an XML type)."""
        return Payload.from_bytes(b"<feed><title>hello</title></feed>",
                                  media_type="application/atom+xml")

    async def scenario() -> str:
        session = byref.Session([feed])
        out = await session.handle([{"type": "tool_use", "id": "c1", "name": "feed",
                                     "input": {}}])
        key = json_key(out[0]["content"])
        read = await session.handle([{"type": "tool_use", "id": "c2", "name": "read_result",
                                      "input": {"ref": {"$ref": {"type": "Blob", "key": key}}}}])
        return str(read[0]["content"])

    def json_key(text: object) -> str:
        found = re.search(KEY_PATTERN, str(text))
        assert found is not None, text
        return found.group(0)

    assert "<title>hello</title>" in asyncio.run(scenario())
