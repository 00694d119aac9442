"""Provider-neutral request and response shapes: what a `Model` receives and answers.

Providers (Anthropic, OpenAI, scripted) convert at the edge; nothing else in byref sees their types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from byref.jsonview import dumps


@dataclass(frozen=True, slots=True)
class Block:
    type: Literal["text", "tool_use", "tool_result"]
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None
    is_error: bool = False

    def chars(self) -> int:
        if self.type == "tool_use":
            return len(self.name) + len(dumps(self.input))
        return len(self.text)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Literal["user", "assistant"]
    content: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class Request:
    """Exactly what the model receives in one turn."""

    system: str
    tools: tuple[dict[str, Any], ...]
    messages: tuple[ChatMessage, ...]

    def tools_text(self) -> str:
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
    blocks: tuple[Block, ...]
    usage: Usage | None = None
    """Set by real providers; a scripted step may leave it out."""

    @property
    def calls(self) -> tuple[Block, ...]:
        return tuple(b for b in self.blocks if b.type == "tool_use")


class Model(Protocol):
    def respond(self, request: Request) -> Response: ...
