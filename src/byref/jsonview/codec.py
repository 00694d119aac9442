"""JSON encode/decode with msgspec (exact for integers past 64 bits, unlike orjson)."""

from __future__ import annotations

import ast
import math
from typing import Any

import msgspec

from byref.errors import DeveloperError

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class JsonEncodeError(DeveloperError, TypeError):
    """A value cannot be represented as JSON; the message names the offending type."""


def encode(value: Any) -> bytes:
    """`value` as compact JSON bytes; raises `JsonEncodeError` for text that is not valid
    Unicode."""
    try:
        return _encoder.encode(value)
    except UnicodeEncodeError as exc:
        raise JsonEncodeError(
            f"text holds a lone surrogate {exc.object[exc.start:exc.end]!r} (not valid Unicode, "
            "e.g. a file name decoded with os.fsdecode), which JSON cannot carry"
        ) from exc
    except ValueError as exc:  # an integer past Python's 4,300-digit str conversion limit
        raise JsonEncodeError(f"value is not JSON-serializable: {str(exc)[:200]}") from exc
    except (TypeError, msgspec.EncodeError) as exc:
        raise JsonEncodeError(f"value is not JSON-serializable: {str(exc)[:300]}") from exc


MAX_DEPTH = 256
"""Containers nested deeper than this are not recorded: encoders and validators recurse, and a
value this deep is never a tool's real input (JSON parsers in front of byref stop far sooner)."""


def unrecordable(value: Any, *, where: str = "the value") -> str | None:
    """Why `value` (model input, a tool's result) cannot be encoded as JSON; None when it can.

    Encodes first (the common case, at C speed); only a value that fails is walked, iteratively,
    to name the offending spot: a string with a lone surrogate, an integer too long to write, a
    key that is not a string.
    """
    try:
        _encoder.encode(value)
        return None
    except (TypeError, ValueError, msgspec.EncodeError, RecursionError):
        pass
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, at, depth = stack.pop()
        spot = f"{where} at {at[:120]!r}" if at else where
        if depth > MAX_DEPTH and isinstance(item, dict | list | tuple):
            return f"{spot} is nested more than {MAX_DEPTH} levels deep, too deep to record"
        if isinstance(item, str):
            if not _utf8_ok(item):
                return f"{spot} holds text with a lone surrogate (not valid Unicode)"
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            continue
        elif isinstance(item, int):
            if item.bit_length() > 14_000:  # ~4,214 digits: under the str conversion limit
                digits = int(item.bit_length() * 0.30103) + 1
                return f"{spot} is an integer of about {digits:,} digits, too long to record"
        elif isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    return f"{spot} has a key of type {type(k).__name__!r}; keys must be text"
                if not _utf8_ok(k):
                    return f"{spot} has a key with a lone surrogate (not valid Unicode)"
                stack.append((v, f"{at}.{k[:40]}" if at else k[:40], depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}.{i}" if at else str(i), depth + 1)
                         for i, v in enumerate(item))
    return f"{where} is not JSON-serializable"


LITERAL_MAX = 64 << 20
"""Text longer than this is not tried as a Python literal (the parser holds it all in memory)."""


def literal_value(text: str) -> Any | None:
    """The JSON value a Python-literal dump of rows stands for (mcp-server-sqlite prints
    `str(rows)`), or None when `text` is not one. Used only when a JSON read asks, on demand:
    the text itself is always kept as it was."""
    if len(text) > LITERAL_MAX or text.lstrip()[:1] not in ("[", "{"):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if _json_safe(value) else None


def _json_safe(value: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float):
            if not math.isfinite(v):
                return False
        elif not (v is None or isinstance(v, str | int | bool)):
            return False  # tuples, bytes, sets: not JSON
    return True


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def dumps(value: Any) -> str:
    """`value` as compact JSON text (see `encode`)."""
    return encode(value).decode()


def decode(data: bytes | str) -> Any:
    """The JSON value in `data`."""
    return _decoder.decode(data)
