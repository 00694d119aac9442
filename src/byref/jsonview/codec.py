"""JSON encode/decode with msgspec (exact for integers past 64 bits, unlike orjson)."""

from __future__ import annotations

from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class JsonEncodeError(TypeError):
    """A value cannot be represented as JSON; the message names the offending type."""


def encode(value: Any) -> bytes:
    try:
        return _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as exc:
        raise JsonEncodeError(f"value is not JSON-serializable: {exc}") from exc


def dumps(value: Any) -> str:
    return encode(value).decode()


def decode(data: bytes | str) -> Any:
    return _decoder.decode(data)
