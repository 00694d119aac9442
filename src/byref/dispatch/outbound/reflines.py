"""The ref line: the one line under every inline result that names the result itself.

Owns the form a small result's reference takes, and the protocol sentence that teaches it. An
inline (not placed) result is shown with a last line `[ref r75061770]` — the handle of the part
that recorded it (`byref.refs.handle`: the seq's last nine digits, and `p` and the part unless
it is 0), at most eight o200k tokens — so the model can pass any result it sees to another tool
as `{"$ref": "r75061770"}` instead of retyping it, and the tool receives the recorded value
exactly. Renderings recorded before handles (`[ref: {"$ref":{"type":"Message",…}}]`, the long
line) are still read as ref lines. An error the tool
itself answered with (an MCP server's `isError` content, shown whole) is a result too: its part
records the tool's own words, and its line names them. A refusal of byref's (the tool did not
run) has no line: it holds nothing to pass on. A placed result or a marker needs no line: its
`value` already is a ref.

The law: the line names the seq and part the result is recorded at, so whoever appends the
result message at another seq than dispatch was told moves the line with it (`moved`), or drops
it (`without`) — a line never names a message that is not this result.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Final

from byref.errors import InvalidValue
from byref.refs import ENVELOPE_KEY, HANDLE_SPAN, MessageRef, envelope, handle, quote
from byref.transcript import Part

EXAMPLE_SEQ: Final = 29_075_061_770
"""A seq of the size a gateway's records use (milliseconds since 2026; `fresh_origin`)."""
_HEAD: Final = "\n[ref"
_LINE_RE: Final = re.compile(r"\[ref r(\d{1,9})(?:p(\d+))?\]")
_LONG_LINE_RE: Final = re.compile(
    r'\[ref: \{"\$ref":\{"type":"Message","seq":(\d+),"part":(\d+)\}\}\]')
"""The line as rendered before handles (still read in recorded renderings)."""


def ref_line(seq: int, part: int) -> str:
    """The line (without its leading newline) naming message `seq`, part `part`."""
    return f"[ref {handle(seq, part)}]"


def long_ref_line(seq: int, part: int) -> str:
    """The long line of renderings recorded before handles (read, never written)."""
    return f'[ref: {{"$ref":{{"type":"Message","seq":{seq},"part":{part}}}}}]'


_EXAMPLE: Final = handle(EXAMPLE_SEQ)
REFS_PROTOCOL: Final = (
    f"Each tool result ends with a line like {ref_line(EXAMPLE_SEQ, 0)}, its exact reference. "
    f'To pass a result to a tool, put {{"$ref":"{_EXAMPLE}"}} in place of the argument (any '
    f'argument; "{_EXAMPLE}.rows.0" for a part); never retype data. A large or binary result '
    'shows a preview or marker whose "value" is a reference object: pass it the same way. Copy '
    "references as shown; never guess one."
)
"""The sentence for a system prompt (and the gateway's instructions) teaching references."""


def with_line(part: Part, seq: int, index: int) -> Part:
    """`part` shown with the ref line naming message `seq`, part `index`."""
    # Positional, not `dataclasses.replace` (~3 us more): every inline result passes here.
    return Part(part.type, part.value, f"{part.rendered}\n{ref_line(seq, index)}", part.tool,
                part.call_id, part.is_error, part.derived, part.reason)


def split(rendered: str) -> tuple[str, str | None]:
    """(the result's own text, its ref line or None) of a rendering."""
    at = rendered.rfind(_HEAD)
    if at < 0:
        return rendered, None
    line = rendered[at + 1:]
    if _LINE_RE.fullmatch(line) is None and _LONG_LINE_RE.fullmatch(line) is None:
        return rendered, None
    return rendered[:at], line


def copied(line: str) -> dict[str, Any]:
    """The envelope a model writes for a ref line: `{"$ref": "r…"}` (the long line's object for
    a rendering recorded before handles)."""
    found = _LINE_RE.fullmatch(line)
    if found is not None:
        return {ENVELOPE_KEY: line[len("[ref "):-1]}
    long = _LONG_LINE_RE.fullmatch(line)
    if long is None:
        raise InvalidValue(f"{quote(line)} is not a ref line")
    return envelope(MessageRef(seq=int(long.group(1)), part=int(long.group(2))))


def named(rendered: str | None, latest: int) -> tuple[int, int] | None:
    """(seq, part) the rendering's ref line names, or None when it has none; `latest` is a seq
    at or after the result's own (the record's last), which a handle's digits are read back by."""
    if rendered is None:
        return None
    _, line = split(rendered)
    if line is None:
        return None
    found = _LINE_RE.fullmatch(line)
    if found is None:
        long = _LONG_LINE_RE.fullmatch(line)
        assert long is not None
        return int(long.group(1)), int(long.group(2))
    tail, part = int(found.group(1)), int(found.group(2) or 0)
    return latest - (latest - tail) % HANDLE_SPAN, part


def moved(part: Part, seq: int, index: int) -> Part:
    """`part` with its ref line (if it has one) naming message `seq`, part `index` instead."""
    if part.rendered is None:
        return part
    body, line = split(part.rendered)
    if line is None or line == ref_line(seq, index):
        return part
    return with_line(replace(part, rendered=body), seq, index)


def without(part: Part) -> Part:
    """`part` without its ref line."""
    if part.rendered is None:
        return part
    body, line = split(part.rendered)
    return part if line is None else replace(part, rendered=body)
