"""A model's tool call as dispatch sees it, and the refusal that answers one the tool must not run.

The law: whatever a refusal quotes, the model reads at most `REFUSAL_MAX` characters of it; text
that is not valid Unicode and integers too long to write are escaped before they are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from byref.errors import RefusalReason, Refused
from byref.jsonview.codec import MAX_DEPTH, unrecordable
from byref.refs import quote

REFUSAL_MAX = 1_800
"""A refusal the model reads is at most this many characters, whatever it quotes."""


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the model made it: id, tool name, input."""
    id: str
    name: str
    input: Any
    server_refs: frozenset[str] = field(default=frozenset(), compare=False)
    """Arguments whose `$ref` server code built (a recipe the model may not write: code mode's
    host passing on a handle it issued), parsed as the server's refs; only code in this process
    sets it, never anything read from the model."""

    def recordable(self) -> Call:
        """This call as the transcript can hold it: text that is not valid Unicode is escaped,
        an integer too long to write becomes a note. Only a call that is refused needs it."""
        if unrecordable([self.id, self.name, self.input]) is None:
            return self
        return Call(escaped(self.id), escaped(self.name), escaped(self.input), self.server_refs)


class Refusal(Refused):
    """The tool did not run (or its result was refused); `text` is what the model is told."""

    def __init__(self, text: str, reason: RefusalReason, *, ref: str | None = None,
                 detail: str | None = None, code: str | None = None,
                 result: str | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.reason = reason
        self.ref = ref
        self.detail = detail
        self.code = code
        """A tool's own code for its refusal (`ToolRefusal(code=...)`), beside `reason`."""
        self.result = result
        """The tool's own error content (`ToolRefusal(result=...)`): the part's value."""


def clip(text: str | None, limit: int = 500) -> str | None:
    """At most `limit` characters of a message, saying how long it really was."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text):,} characters in all]"


def escaped(value: Any, _depth: int = 0) -> Any:
    """`value` with every string made valid Unicode (lone surrogates backslash-escaped), every
    integer too long to record replaced by a note, and containers nested past `MAX_DEPTH`
    replaced by a note; everything else as it was."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14_000:
        return f"<{quote(value)}>"
    if isinstance(value, dict | list | tuple) and _depth >= MAX_DEPTH:
        return f"<nested more than {MAX_DEPTH} levels deep: not recorded>"
    if isinstance(value, dict):
        return {escaped(k) if isinstance(k, str) else str(k): escaped(v, _depth + 1)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(v, _depth + 1) for v in value]
    return value
