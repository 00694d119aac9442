"""The agent loop over a `Model` port: request → response → dispatch → record, until text.

The law: every request is recorded exactly as the model received it, and each turn's request is
rendered from the transcript alone (no hidden state), with the system text and the tool
declarations first and byte-stable. With a `budget`, request assembly (`byref.context`) may
replace older settled results with exact-reread stubs; its only state is which results it has
replaced, which is sticky so the prefix stays cacheable. Explicit reads (`read_result`) are
bounded by the explicit-read limit, not by placement's automatic-insertion limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from byref.context import Assembled, ContextAssembler, RequestBudget
from byref.discovery import Discovery
from byref.dispatch import Call, Dispatcher, Policy
from byref.dispatch.policy import EXPLICIT_READ_FRAME
from byref.errors import DeveloperError
from byref.events import Emitter
from byref.harness.messages import Block, ChatMessage, Model, Request
from byref.jsonview import dumps
from byref.reads import ReadLimits
from byref.resolve import Caps
from byref.store import ArtifactStore, MemoryStore, Scope
from byref.tools import Tool, builtin_tools
from byref.tools.present import PRESENT_TOOL_NAME, make_present_tool
from byref.tools.read_result import READ_RESULT_NAME, make_read_result
from byref.transcript import Message, Part, Transcript

REFS_PROTOCOL = (
    "Large or binary tool results are not shown in full: you get a preview, a shape and a "
    'reference such as {"$ref": {"type": "Message", "seq": 4, "part": 0, "field": "value"}}. '
    "To give such a value to a tool, put that reference object itself in place of the argument "
    "(every argument accepts one); never retype the data. You may write references of type "
    "Message (seq, part, field) and Blob (key), copied from results you were shown."
)
PLAIN_SYSTEM = "You are a helpful agent. Use the tools to do what the user asks."


class StepLimitError(DeveloperError, RuntimeError):
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
        model: Model | str,
        tools: Sequence[Tool] = (),
        *,
        system: str | None = None,
        transcript: Transcript | None = None,
        store: ArtifactStore | Literal["memory"] | None = "memory",
        scope: Scope | None = None,
        policy: Policy | None = None,
        caps: Caps | None = None,
        emit: Emitter | None = None,
        max_steps: int = 32,
        budget: RequestBudget | int | None = None,
        read_limits: ReadLimits | None = None,
        discovery: Discovery | None = None,
    ) -> None:
        if isinstance(model, str):  # a model id such as "anthropic:claude-sonnet-4-6"
            from byref.harness.providers import model_from_id

            model = model_from_id(model)
        self.model = model
        self.policy = policy or Policy()
        if read_limits is not None:
            # The explicit-read limit is the reads' dial; placement follows it for reads.
            self.policy = replace(self.policy, explicit_read_bytes=max(
                self.policy.explicit_read_bytes,
                read_limits.explicit_read_bytes + EXPLICIT_READ_FRAME))
        # One automatic-insertion dial: reads see the same value placement uses.
        self.read_limits = read_limits or ReadLimits(
            auto_insert_bytes=self.policy.auto_insert_bytes)
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
        self.assembler = self._budgeted_assembly(budget, tools, emit)
        if self.store is not None and self.policy.refs:
            # A stored result's note names these readers: whoever can store, declares them.
            have = {t.name for t in tools}
            tools.extend(t for t in builtin_tools(self.read_limits, present=False)
                         if t.name not in have)
        self.assembled: list[Assembled[Request]] = []
        """One entry per request when a budget is in force: its bytes and replacements."""
        self.discovery = discovery
        # With discovery, `tools` are the scaffolding (always declared); the catalog's tools are
        # declared when the working set holds them, and callable throughout.
        self.scaffolding = [*tools, *discovery.tools] if discovery is not None else tools
        callable_tools = self.scaffolding + (
            [t for t in discovery.catalog.tools() if t.name not in {s.name for s in tools}]
            if discovery is not None else [])
        self.dispatcher = Dispatcher(
            callable_tools, transcript=self.transcript, store=self.store, scope=self.scope,
            policy=self.policy, caps=caps, emit=emit,
        )
        default = f"{PLAIN_SYSTEM}\n\n{REFS_PROTOCOL}" if self.policy.refs else PLAIN_SYSTEM
        self.system = system if system is not None else default
        self.max_steps = max_steps
        self.requests: list[Request] = []
        self._tools = tuple(self.dispatcher.declarations())

    def _budgeted_assembly(self, budget: RequestBudget | int | None, tools: list[Tool],
                           emit: Emitter | None) -> ContextAssembler | None:
        """With a budget: the assembler, and `read_result` bound to its room (unless the caller
        brought their own), since replaced results point the model at it."""
        if budget is None:
            return None
        assembler = ContextAssembler(budget, store=self.store, scope=self.scope, emit=emit)
        # Storeless runs get it too: a stub's reread ref is a Message ref into the transcript.
        if self.policy.refs and all(t.name != READ_RESULT_NAME for t in tools):
            tools.append(make_read_result(self.read_limits, room=assembler.room))
        return assembler

    def request(self) -> Request:
        """The request the model would receive now, rendered from the transcript (and, with a
        budget, assembled to fit it; the check runs on the very object returned)."""
        system, tools = self._surface()
        if self.assembler is None:
            return Request(system, tools, tuple(render(self.transcript)))
        assembled = self.assembler.assemble(
            list(self.transcript),
            build=lambda view: Request(system, tools, tuple(render(view))),
            measure=request_bytes, text_of=Request.all_text,
        )
        self.assembled.append(assembled)
        return assembled.request

    def _surface(self) -> tuple[str, tuple[dict[str, Any], ...]]:
        """System text and declarations for the next request. With discovery, the working set
        is projected from the transcript and its one varying line goes last."""
        if self.discovery is None:
            return self.system, self._declarations()
        self.dispatcher.refresh()
        assembly = self.discovery.assemble(self.scaffolding, self.transcript,
                                           refs=self.policy.refs)
        current = tuple(assembly.declarations)
        if current != self._tools:
            self._tools = current
        return "\n\n".join([self.system, *assembly.system_lines]), self._tools

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
                    # Text that is not valid Unicode (a lone surrogate) is kept escaped: the
                    # transcript must hold every turn, and JSON cannot carry the surrogate.
                    parts.append(Part(type="text", value=block.text.encode(
                        "utf-8", "backslashreplace").decode("utf-8")))
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
            results = [self._dispatch(c, call_seq=assistant.seq, seq=seq, part=i)
                       for i, c in enumerate(turn_calls)]
            self.transcript.append("tool", results)
        raise StepLimitError(
            f"The model was still calling tools after {self.max_steps} steps; raise max_steps "
            "or look at the transcript for a loop."
        )

    def _dispatch(self, c: Call, *, call_seq: int, seq: int, part: int) -> Part:
        result = self.dispatcher.dispatch(c, call_seq=call_seq, seq=seq, part=part)
        tool = self.dispatcher.tools.get(c.name)
        explicit = tool is not None and tool.explicit_read
        if self.assembler is not None and not explicit:
            # Other results of the turn share the room a read in the same turn may use.
            self.assembler.room.consume(len((result.rendered or "").encode()))
        return result


def request_bytes(request: Request) -> int:
    """UTF-8 bytes of everything model-visible in a request: what a budget is checked against."""
    total = len(request.system.encode()) + len(request.tools_text().encode())
    for message in request.messages:
        for block in message.content:
            if block.type == "tool_use":
                total += len(block.name.encode()) + len(dumps(block.input).encode())
            else:
                total += len(block.text.encode())
    return total


def render(transcript: Iterable[Message]) -> list[ChatMessage]:
    """Transcript (or an assembled view of it) → provider-neutral messages (tool results travel
    in a user message)."""
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
