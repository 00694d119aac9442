"""The agent loop over a `Model` port: request → response → dispatch → record, until text.

The law: every request is recorded exactly as the model received it, and each turn's request is
rendered from the transcript alone (no hidden state), with the system text and the tool
declarations first and byte-stable.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from byref.dispatch import Call, Dispatcher, Policy
from byref.events import Emitter
from byref.harness.messages import Block, ChatMessage, Model, Request
from byref.resolve import Caps
from byref.store import ArtifactStore, MemoryStore, Scope
from byref.tools import Tool
from byref.tools.present import PRESENT_TOOL_NAME, make_present_tool
from byref.transcript import Part, Transcript

REFS_PROTOCOL = (
    "Large or binary tool results are not shown in full: you get a preview, a shape and a "
    'reference such as {"$ref": {"type": "Message", "seq": 4, "part": 0, "field": "value"}}. '
    "To give such a value to a tool, put that reference object itself in place of the argument "
    "(every argument accepts one); never retype the data. You may write references of type "
    "Message (seq, part, field) and Blob (key), copied from results you were shown."
)
PLAIN_SYSTEM = "You are a helpful agent. Use the tools to do what the user asks."


class StepLimitError(RuntimeError):
    """The model kept calling tools past `max_steps`."""


@dataclass
class RunResult:
    text: str
    requests: list[Request]
    transcript: Transcript
    steps: int = 0
    calls: list[Call] = field(default_factory=list)


class Harness:
    def __init__(
        self,
        model: Model,
        tools: Sequence[Tool],
        *,
        system: str | None = None,
        transcript: Transcript | None = None,
        store: ArtifactStore | Literal["memory"] | None = "memory",
        scope: Scope | None = None,
        policy: Policy | None = None,
        caps: Caps | None = None,
        emit: Emitter | None = None,
        max_steps: int = 32,
    ) -> None:
        self.model = model
        self.policy = policy or Policy()
        self.transcript = transcript if transcript is not None else Transcript()
        # "memory" (the default) gives the run its own in-memory store; None runs storeless.
        self.store: ArtifactStore | None = MemoryStore(emit=emit) if store == "memory" else store
        self.scope = scope or Scope("local", conversation=uuid.uuid4().hex)
        tools = list(tools)
        if self.store is not None and self.policy.refs:
            if any(t.name == PRESENT_TOOL_NAME for t in tools):
                raise ValueError(
                    f"The tool name {PRESENT_TOOL_NAME!r} is reserved when an artifact store is "
                    "attached (byref attaches its own); rename yours."
                )
            tools.append(make_present_tool())
        self.dispatcher = Dispatcher(
            tools, transcript=self.transcript, store=self.store, scope=self.scope,
            policy=self.policy, caps=caps, emit=emit,
        )
        default = f"{PLAIN_SYSTEM}\n\n{REFS_PROTOCOL}" if self.policy.refs else PLAIN_SYSTEM
        self.system = system if system is not None else default
        self.max_steps = max_steps
        self.requests: list[Request] = []
        self._tools = tuple(self.dispatcher.declarations())

    def request(self) -> Request:
        """The request the model would receive now, rendered from the transcript."""
        return Request(self.system, self._declarations(), tuple(render(self.transcript)))

    def _declarations(self) -> tuple[dict[str, Any], ...]:
        # Rebuilt each turn (a live description may change) but from cached schema objects, so
        # the bytes are identical whenever nothing changed.
        current = tuple(self.dispatcher.declarations())
        if current != self._tools:
            self._tools = current
        return self._tools

    def run(self, user_text: str) -> RunResult:
        self.transcript.append("user", [Part(type="text", value=user_text)])
        calls: list[Call] = []
        for step in range(1, self.max_steps + 1):
            request = self.request()
            self.requests.append(request)
            response = self.model.respond(request)
            parts: list[Part] = []
            turn_calls: list[Call] = []
            for block in response.blocks:
                if block.type == "text":
                    parts.append(Part(type="text", value=block.text))
                elif block.type == "tool_use":
                    c = Call(block.id, block.name, block.input)
                    turn_calls.append(c)
                    parts.append(self.dispatcher.call_part(c))
            if not parts:
                parts.append(Part(type="text", value=""))
            assistant = self.transcript.append("assistant", parts)
            if not turn_calls:
                text = "".join(b.text for b in response.blocks if b.type == "text")
                return RunResult(text, self.requests, self.transcript, step, calls)
            calls.extend(turn_calls)
            seq = assistant.seq + 1
            results = [
                self.dispatcher.dispatch(c, call_seq=assistant.seq, seq=seq, part=i)
                for i, c in enumerate(turn_calls)
            ]
            self.transcript.append("tool", results)
        raise StepLimitError(
            f"The model was still calling tools after {self.max_steps} steps; raise max_steps "
            "or look at the transcript for a loop."
        )


def render(transcript: Transcript) -> list[ChatMessage]:
    """Transcript → provider-neutral messages (tool results travel in a user message)."""
    out: list[ChatMessage] = []
    for message in transcript:
        blocks: list[Block] = []
        for part in message.parts:
            if part.type == "text":
                blocks.append(Block("text", text=str(part.value)))
            elif part.type == "tool_call":
                blocks.append(Block("tool_use", id=part.call_id or "", name=part.tool or "",
                                    input=part.value["input"]))
            else:
                blocks.append(Block("tool_result", text=part.rendered or "",
                                    id=part.call_id or "", is_error=part.is_error))
        if message.role == "assistant":
            out.append(ChatMessage("assistant", tuple(blocks)))
        else:
            out.append(ChatMessage("user", tuple(blocks)))
    return out
