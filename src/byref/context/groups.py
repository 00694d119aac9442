"""Tool groups and their replacement stubs: the units request assembly may compact.

Owns what a "tool group" is (an assistant message that made calls, plus the tool message holding
their results), when one is fully settled (every call has its result), and the exact-reread stub
that stands in for a replaced result body. The law: a stub depends only on the part it replaces
(its seq, part, tool and size), so the same replacement renders the same bytes on every later
turn; the stub carries a Message ref that rereads the recorded result exactly (the transcript is
append-only, so the address never changes meaning).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from byref.jsonview import dumps
from byref.refs import MessageRef, envelope
from byref.transcript import Message, Part

REREAD_TOOL: Final = "read_result"

Address = tuple[int, int]
"""(seq, part) of one tool result in the transcript."""


@dataclass(frozen=True, slots=True)
class Group:
    """One assistant turn's calls with their results: where they sit in the transcript and the
    addresses of the results."""
    index: int
    call_seq: int
    result_seq: int | None
    calls: int
    results: tuple[Address, ...]

    @property
    def settled(self) -> bool:
        """Every call has its result recorded."""
        return self.result_seq is not None and len(self.results) >= self.calls


def groups(messages: Sequence[Message]) -> list[Group]:
    """The tool groups of a transcript, oldest first."""
    out: list[Group] = []
    for i, message in enumerate(messages):
        calls = sum(1 for p in message.parts if p.type == "tool_call")
        if message.role != "assistant" or not calls:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        results: tuple[Address, ...] = ()
        result_seq = None
        if nxt is not None and nxt.role == "tool":
            result_seq = nxt.seq
            results = tuple((nxt.seq, j) for j, p in enumerate(nxt.parts)
                            if p.type == "tool_result")
        out.append(Group(len(out), message.seq, result_seq, calls, results))
    return out


def stub(part: Part, seq: int, index: int) -> str:
    """The exact-reread stand-in for a replaced result body."""
    size = len((part.rendered or "").encode())
    body = {
        "replaced": True,
        "tool": part.tool,
        "bytes": size,
        "reread": envelope(MessageRef(part=index, seq=seq)),
        "note": f"Moved out to fit the request budget; unchanged. Reread it exactly: "
                f"{REREAD_TOOL}(ref=reread).",
    }
    return dumps(body)


def replaceable(part: Part, seq: int, index: int) -> bool:
    """Worth replacing: a result whose stub is shorter than its body."""
    rendered = part.rendered or ""
    return part.type == "tool_result" and len(stub(part, seq, index)) < len(rendered)


def apply(messages: Sequence[Message], replaced: set[Address]) -> list[Message]:
    """A copy of `messages` with the bodies at `replaced` swapped for their stubs."""
    if not replaced:
        return list(messages)
    out: list[Message] = []
    for message in messages:
        if not any((message.seq, j) in replaced for j in range(len(message.parts))):
            out.append(message)
            continue
        parts = tuple(
            replace(p, rendered=stub(p, message.seq, j)) if (message.seq, j) in replaced else p
            for j, p in enumerate(message.parts)
        )
        out.append(Message(message.seq, message.role, parts))
    return out


def with_note(messages: list[Message], note: str) -> list[Message]:
    """`messages` with `note` as a final text part of the last message (the varying suffix)."""
    if not messages:
        return messages
    last = messages[-1]
    return [*messages[:-1],
            Message(last.seq, last.role, (*last.parts, Part(type="text", value=note)))]
