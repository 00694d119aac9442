"""Provider-neutral request and response shapes: what a `Model` receives and answers.

Providers (Anthropic, OpenAI, scripted) convert at the edge; nothing else in byref sees their types.
The `Model` port is async: `await model.respond(request, on_delta=...)` answers one turn and,
given a callback, streams the turn's text and tool-call fragments to it as they arrive
(`TextDelta`, `ToolCallDelta`), before the whole `Response` is returned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from byref.jsonview import dumps


@dataclass(frozen=True, slots=True)
class Block:
    """One piece of a message: text, a tool call (`tool_use`) or a tool result."""
    type: Literal["text", "tool_use", "tool_result"]
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None
    is_error: bool = False

    def chars(self) -> int:
        """Model-visible characters of the block."""
        if self.type == "tool_use":
            return len(self.name) + len(dumps(self.input))
        return len(self.text)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One provider-neutral message (tool results travel in a user message)."""
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class Request:
    """Exactly what the model receives in one turn."""

    system: str
    tools: tuple[dict[str, Any], ...]
    messages: tuple[ChatMessage, ...]

    def tools_text(self) -> str:
        """The declarations as the JSON text the model is shown."""
        return dumps(list(self.tools))

    def chars(self) -> int:
        """Characters in the whole request: system text, tool declarations and every message."""
        return (len(self.system) + len(self.tools_text())
                + sum(b.chars() for m in self.messages for b in m.content))

    def all_text(self) -> str:
        """Every model-visible string of the request, for audits ("does X ever appear?")."""
        pieces = [self.system, self.tools_text()]
        for message in self.messages:
            for block in message.content:
                pieces.append(block.text if block.type != "tool_use" else dumps(block.input))
        return "\n".join(pieces)


@dataclass(frozen=True, slots=True)
class Usage:
    """What one turn cost as the provider counted it, and why the model stopped.

    `input_tokens` is the whole request, cached part included; `cache_read_tokens` and
    `cache_write_tokens` are the parts of it served from and written to the prompt cache (`None`
    where the provider does not report it). `stop_reason` is normalised across providers
    ("end_turn", "tool_use", "max_tokens", "refusal", …); `provider_stop_reason` is the raw one.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    stop_reason: str = ""
    provider_stop_reason: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True)
class Response:
    """One model turn: its blocks in order and, from real providers, its usage."""
    blocks: tuple[Block, ...]
    usage: Usage | None = None
    """Set by real providers; a scripted step may leave it out."""

    @property
    def calls(self) -> tuple[Block, ...]:
        """The tool calls of the turn, in order."""
        return tuple(b for b in self.blocks if b.type == "tool_use")


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A fragment of the turn's text, in the order the model wrote it."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of the `index`-th tool call of the turn: its id and name arrive on the first
    fragment of that call, `arguments` is the next piece of its JSON arguments text."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    type: Literal["tool_call"] = "tool_call"


Delta: TypeAlias = TextDelta | ToolCallDelta
OnDelta: TypeAlias = Callable[[Delta], None]
"""A streaming callback: called on the event loop, once per fragment; it should not block."""


class Model(Protocol):
    """The model port: one turn in, one turn out. `on_delta`, when given, receives the turn's
    fragments as they arrive (a provider then streams, whatever its `stream` setting)."""

    async def respond(self, request: Request, *, on_delta: OnDelta | None = None
                      ) -> Response:
        """The model's answer to `request`."""
        ...


class SyncModel(Protocol):
    """A model with a blocking `respond` (byref before the async port, or your own): the
    harness still takes one and runs it in a worker thread; it gets no streaming callback."""

    def respond(self, request: Request) -> Response:
        """The model's answer to `request`, blocking until it is complete."""
        ...


def deltas(response: Response) -> list[Delta]:
    """A whole response as the fragments a stream of it would have carried (one per block):
    what a model that cannot stream hands a callback."""
    out: list[Delta] = []
    index = 0
    for block in response.blocks:
        if block.type == "text" and block.text:
            out.append(TextDelta(block.text))
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, str) else dumps(block.input)
            out.append(ToolCallDelta(index, id=block.id, name=block.name, arguments=arguments))
            index += 1
    return out
