"""Media types: the one home of byref's checks on an artifact's `mediaType`.

Owns what counts as JSON, JSON Lines, text, image and audio, parameters (`; charset=…`) and case
ignored. The law: every layer asks these functions instead of testing strings itself, so an
artifact is read, previewed, served and costed as the same kind everywhere. Pure; imports
nothing of byref.
"""

from __future__ import annotations

from typing import Final

JSON_LINES: Final = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines",
                     "application/json-seq")
"""The JSON Lines types (one JSON value per line)."""

TEXT_TYPES: Final = ("application/json", "application/xml", "application/yaml",
                     "application/javascript", "application/csv", "image/svg+xml", *JSON_LINES)
"""Types outside `text/*` whose bytes are text."""


def base(media_type: str) -> str:
    """`media_type` without parameters, lower-cased: `"Text/CSV; charset=utf-8"` → `"text/csv"`."""
    return media_type.split(";", 1)[0].strip().lower()


def is_json(media_type: str) -> bool:
    """`application/json` or a `+json` type."""
    b = base(media_type)
    return b == "application/json" or b.endswith("+json")


def is_json_lines(media_type: str) -> bool:
    """A JSON Lines type (`JSON_LINES`)."""
    return base(media_type) in JSON_LINES


def is_plain_text(media_type: str) -> bool:
    """A `text/*` type."""
    return base(media_type).startswith("text/")


def is_text(media_type: str) -> bool:
    """Bytes that are text: `text/*`, JSON and JSON Lines, XML, YAML, `+json` / `+xml` types."""
    b = base(media_type)
    return b.startswith("text/") or b in TEXT_TYPES or b.endswith(("+json", "+xml"))


def is_image(media_type: str) -> bool:
    """An `image/*` type."""
    return base(media_type).startswith("image/")


def is_audio(media_type: str) -> bool:
    """An `audio/*` type."""
    return base(media_type).startswith("audio/")
