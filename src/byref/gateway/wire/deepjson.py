"""JSON read to any depth without recursion, for the lines the SDK's parser refuses (`malformed`).

Owns reading a JSON text that pydantic's parser (a recursion limit of about 200 levels, integers
of at most 4,300 digits, no lone surrogate escapes) or the standard one (Python's recursion
limit) will not read, far enough to answer it. The law: a text is read iff it is JSON as the
standard `json.loads` reads it (RFC 8259 plus `NaN`, `Infinity`, `-Infinity`), at any depth; the
value comes back with every container nested deeper than `keep` levels left empty (same kind),
an integer too long to convert as a `LongNumber`, and the text's greatest depth beside it.
"""

from __future__ import annotations

import re
from _json import scanstring  # json.decoder's (C), which typeshed lists only here
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"""[ \t\n\r]*(?:
    ([\[{]) | ([\]}]) | (,) | (:) | (") |
    (-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?) |
    (true|false|null|NaN|Infinity|-Infinity)
)""", re.VERBOSE)
_OPEN, _CLOSE, _COMMA, _COLON, _STRING, _NUMBER, _WORD = range(1, 8)
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None, "NaN": float("nan"),
                          "Infinity": float("inf"), "-Infinity": float("-inf")}
_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class LongNumber:
    """An integer with more digits than Python converts from text (4,300): kept by its length."""

    digits: int

    def __repr__(self) -> str:
        return f"an integer of {self.digits:,} digits"


def read(text: str, keep: int) -> tuple[Any, int]:
    """`text`'s value with containers below depth `keep` left empty, and its greatest depth;
    ValueError saying where when it is not JSON."""
    # Each open container: the kept object (None below `keep`), the key awaiting its value, and
    # what comes next ("value", "key", "colon", "comma").
    stack: list[list[Any]] = []
    root: Any = None
    deepest, pos, expect = 0, 0, "value"
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"not JSON at character {pos:,}")
        kind, pos = match.lastindex, match.end()
        top = stack[-1] if stack else None
        if kind == _CLOSE:
            closer = match.group(_CLOSE)
            opened = top is not None and top[3] == closer and (
                expect == "comma" or (expect in ("value", "key") and top[4]))
            if not opened:
                raise ValueError(f"unexpected {closer!r} at character {pos - 1:,}")
            stack.pop()
            if not stack:
                return _end(text, pos, root, deepest)
            expect = "comma"
            continue
        if kind == _COMMA:
            if top is None or expect != "comma":
                raise ValueError(f"unexpected ',' at character {pos - 1:,}")
            expect = "key" if top[3] == "}" else "value"
            top[4] = False
            continue
        if kind == _COLON:
            if top is None or expect != "colon":
                raise ValueError(f"unexpected ':' at character {pos - 1:,}")
            expect = "value"
            continue
        if expect == "key":
            if kind != _STRING:
                raise ValueError(f"expected a member name at character {pos - 1:,}")
            top[1], pos = scanstring(text, pos)  # type: ignore[index]
            top[4], expect = False, "colon"  # type: ignore[index]
            continue
        if expect != "value":
            raise ValueError(f"unexpected value at character {match.start(kind or 0):,}")
        kept = top is None or top[0] is not None
        value: Any
        if kind == _OPEN:
            opener = match.group(_OPEN)
            depth = len(stack) + 1
            deepest = max(deepest, depth)
            value = {} if opener == "{" else []
            frame = [value if depth <= keep else None, None, "", "}" if opener == "{" else "]",
                     True]  # the last: nothing in it yet
            expect = "key" if opener == "{" else "value"
        elif kind == _STRING:
            value, pos = scanstring(text, pos)
        elif kind == _NUMBER:
            value = _number(match.group(_NUMBER)) if kept else None
        else:
            value = _WORDS[match.group(_WORD)]
        if top is None:
            root = value
        elif kept:
            if isinstance(top[0], dict):
                top[0][top[1]] = value
            else:
                top[0].append(value)
        if kind == _OPEN:
            stack.append(frame)
            continue
        if not stack:
            return _end(text, pos, root, deepest)
        expect = "comma"


def _end(text: str, pos: int, root: Any, deepest: int) -> tuple[Any, int]:
    end = _SPACE.match(text, pos)
    if end is None or end.end() != len(text):
        raise ValueError(f"extra data at character {pos:,}")
    return root, deepest


def _number(text: str) -> Any:
    if "." in text or "e" in text or "E" in text:
        return float(text)
    try:
        return int(text)
    except ValueError:  # past Python's limit on converting digits
        return LongNumber(len(text.lstrip("-")))
