"""The agent loop over a `Model` port: request → response → dispatch → record, until text.

Built on `Session`: the session owns the transcript, store, scope and dispatcher and runs each
turn's calls (concurrently, results in call order); the loop adds the model, the requests and
the budget. One code path records a turn, whether the loop is byref's or yours.

The law: every request is recorded exactly as the model received it, and each turn's request is
rendered from the transcript alone (no hidden state), with the system text and the tool
declarations first and byte-stable. With a `budget`, request assembly (`byref.context`) may
replace older settled results with exact-reread stubs; its only state is which results it has
replaced, which is sticky so the prefix stays cacheable. Explicit reads (`read_result`) are
bounded by the explicit-read limit, not by placement's automatic-insertion limit.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from byref.context import Assembled, ContextAssembler, RequestBudget
from byref.discovery import Discovery
from byref.dispatch import Call, Dispatcher, Policy
from byref.dispatch.grounds import Grounds
from byref.dispatch.outbound.reflines import REFS_PROTOCOL as REFS_PROTOCOL
from byref.errors import DeveloperError, InvalidValue
from byref.events import Emitter
from byref.harness.messages import (
    Block,
    ChatMessage,
    Model,
    OnDelta,
    Request,
    Response,
    SyncModel,
    deltas,
)
from byref.harness.options import Limits, legacy
from byref.harness.session import Session, run_blocking
from byref.jsonview import dumps
from byref.reads import ReadLimits
from byref.resolve import Caps
from byref.store import ArtifactStore, Scope
from byref.tools import Tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.readers.present import PRESENT_TOOL_NAME
from byref.tools.readers.read_result import READ_RESULT_NAME, make_read_result
from byref.tools.sources import ToolSource, collect
from byref.transcript import Message, Part, Transcript

PLAIN_SYSTEM = "You are a helpful agent. Use the tools to do what the user asks."


class StepLimitError(DeveloperError, RuntimeError):
    """The model kept calling tools past `max_steps`."""


@dataclass
class RunResult:
    """A finished run: the model's last text, every request as sent, the transcript, the steps
    taken and every call the model made."""
    text: str
    requests: list[Request]
    transcript: Transcript
    steps: int = 0
    calls: list[Call] = field(default_factory=list)


class Harness:
    """The agent loop: `await harness.run(text)` (or `harness.run_sync(text)`) asks the model,
    runs the tools it calls through a `Session` and repeats until the model answers in text.

    `model` is a `Model` (async; a blocking `SyncModel` is run in a worker thread) or a model
    id such as `"anthropic:claude-sonnet-4-6"`. `tools` are `Tool`s or `ToolSource`s. `on_delta`
    receives the model's text and tool-call fragments as they stream (per run, too).
    `code_mode` (True or a `CodeMode`) adds `run_code`: one program calls many tools, and only
    what it prints or returns comes back (`byref.tools.code_mode.run_code`). `limits`
    (`Limits`): turns, the request budget, ref-resolution caps and read limits.
    """

    def __init__(
        self,
        model: Model | SyncModel | str,
        tools: Sequence[Tool | ToolSource] = (),
        *,
        system: str | None = None,
        transcript: Transcript | None = None,
        store: ArtifactStore | Literal["memory"] | None = "memory",
        scope: Scope | None = None,
        policy: Policy | None = None,
        emit: Emitter | None = None,
        discovery: Discovery | None = None,
        code_mode: CodeMode | bool = False,
        limits: Limits | None = None,
        on_delta: OnDelta | None = None,
        caps: Caps | None = None,
        max_steps: int | None = None,
        budget: RequestBudget | int | None = None,
        read_limits: ReadLimits | None = None,
    ) -> None:
        old = legacy("Harness", {"caps": caps, "max_steps": max_steps, "budget": budget,
                                 "read_limits": read_limits})
        limits = replace(limits or Limits(), **old)
        budget, read_limits = limits.budget, limits.read_limits
        if isinstance(model, str):  # a model id such as "anthropic:claude-sonnet-4-6"
            from byref.harness.providers import model_from_id

            model = model_from_id(model)
        self.model = model
        self._async_model = inspect.iscoroutinefunction(
            getattr(type(model), "respond", None)) or inspect.iscoroutinefunction(
            getattr(model, "respond", None))
        self.on_delta = on_delta
        listed = collect(tools)
        grounds = Grounds.make(store=store, scope=scope, policy=policy, emit=emit)
        refs = grounds.policy.refs
        if store is not None and refs and any(t.name == PRESENT_TOOL_NAME for t in listed):
            raise InvalidValue(
                f"The tool name {PRESENT_TOOL_NAME!r} is reserved when an artifact store is "
                "attached (byref attaches its own); rename yours."
            )
        # Made here, not by the session, because a budget's assembler needs them first.
        kept, scope = grounds.store, grounds.scope
        self.assembler: ContextAssembler | None = None
        if budget is not None:
            self.assembler = ContextAssembler(budget, store=kept, scope=scope, emit=emit)
            # Replaced results point the model at read_result: bind one to the assembler's
            # room (unless the caller brought their own). Storeless runs get it too: a stub's
            # reread ref is a Message ref into the transcript.
            if refs and all(t.name != READ_RESULT_NAME for t in listed):
                reads = read_limits or grounds.policy.read_limits()
                listed.append(make_read_result(reads, room=self.assembler.room))
        self.session = Session(listed, store=kept, scope=scope, policy=grounds.policy,
                               transcript=transcript, emit=grounds.emit, discovery=discovery,
                               code_mode=code_mode, limits=limits)
        self.assembled: list[Assembled[Request]] = []
        """One entry per request when a budget is in force: its bytes and replacements."""
        default = f"{PLAIN_SYSTEM}\n\n{REFS_PROTOCOL}" if self.policy.refs else PLAIN_SYSTEM
        self.system = system if system is not None else default
        self.max_steps = limits.max_steps
        self.requests: list[Request] = []
        self._tools = self.session.surface().declarations
        # A recorded message never changes, so each turn reads and renders only the ones
        # appended since; the transcript itself is never copied or re-read.
        self._seen = 0
        self._rendered: list[ChatMessage] = []
        self._messages: list[Message] = []  # with a budget: every message, decoded

    # The session's parts, under the names the harness has always had.
    @property
    def transcript(self) -> Transcript:
        """The conversation's record (the session's)."""
        return self.session.transcript

    @property
    def store(self) -> ArtifactStore | None:
        """Where stored results live (`None`: a storeless run)."""
        return self.session.store

    @property
    def scope(self) -> Scope:
        """The scope every artifact of this run is stored under."""
        return self.session.scope

    @property
    def policy(self) -> Policy:
        """Placement and reference dials."""
        return self.session.policy

    @property
    def read_limits(self) -> ReadLimits:
        """The read tools' limits."""
        return self.session.read_limits

    @property
    def dispatcher(self) -> Dispatcher:
        """The per-call pipeline the session runs calls through."""
        return self.session.dispatcher

    @property
    def discovery(self) -> Discovery | None:
        """Tool discovery, when the catalog is searched rather than declared."""
        return self.session.discovery

    @property
    def scaffolding(self) -> list[Tool]:
        """The tools always declared (with discovery: beside the working set)."""
        return self.session.scaffolding

    def request(self) -> Request:
        """The request the model would receive now, rendered from the transcript (and, with a
        budget, assembled to fit it; the check runs on the very object returned)."""
        system, tools = self._surface()
        new = self._new_messages()
        if self.assembler is None:
            self._rendered.extend(render(new))
            return Request(system, tools, tuple(self._rendered))
        # Assembly reconsiders every message each turn, so it keeps them decoded.
        self._messages.extend(new)
        assembled = self.assembler.assemble(
            self._messages,
            build=lambda view: Request(system, tools, tuple(render(view))),
            measure=request_bytes, text_of=Request.all_text,
        )
        self.assembled.append(assembled)
        return assembled.request

    def _new_messages(self) -> list[Message]:
        """The messages recorded since the last request (a recorded message never changes)."""
        transcript = self.transcript
        new = [transcript.message(transcript.origin + index)
               for index in range(self._seen, len(transcript))]
        self._seen += len(new)
        return new

    def _surface(self) -> tuple[str, tuple[dict[str, Any], ...]]:
        """System text and declarations for the next request. Rebuilt each turn (a live
        description or the working set may change) but from cached schema objects, so the
        bytes — and the tuple itself — are the same whenever nothing changed."""
        surface = self.session.surface()
        if surface.declarations != self._tools:
            self._tools = surface.declarations
        return "\n\n".join([self.system, *surface.system_lines]), self._tools

    async def run(self, user_text: str, *, on_delta: OnDelta | None = None) -> RunResult:
        """Run the conversation from `user_text` until the model answers in text."""
        on_delta = on_delta or self.on_delta
        self.session.user(user_text)
        calls: list[Call] = []
        for step in range(1, self.max_steps + 1):
            request = self.request()
            self.requests.append(request)
            response = await self._respond(request, on_delta)
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
            assistant = self.session.assistant(parts)
            if not turn_calls:
                text = "".join(b.text for b in response.blocks if b.type == "text")
                return RunResult(text, self.requests, self.transcript, step, calls)
            calls.extend(turn_calls)
            # Under a budget the turn's results share the room a read of the same turn may
            # use, so they run one after another, each consuming room as it is recorded.
            await self.session.dispatch(turn_calls, call_seq=assistant.seq,
                                        concurrent=self.assembler is None,
                                        on_result=self._consume)
        raise StepLimitError(
            f"The model was still calling tools after {self.max_steps} steps; raise max_steps "
            "or look at the transcript for a loop."
        )

    def run_sync(self, user_text: str, *, on_delta: OnDelta | None = None) -> RunResult:
        """`run` for code without an event loop."""
        return run_blocking(self.run(user_text, on_delta=on_delta), "harness.run_sync(...)",
                            "await harness.run(...)")

    async def _respond(self, request: Request, on_delta: OnDelta | None) -> Response:
        if self._async_model:
            return await cast(Model, self.model).respond(request, on_delta=on_delta)
        # A blocking model must not hold up the loop (other sessions, async tools).
        from anyio import to_thread

        response: Response = await to_thread.run_sync(cast(SyncModel, self.model).respond,
                                                       request)
        if on_delta is not None:
            for delta in deltas(response):
                on_delta(delta)
        return response

    def _consume(self, c: Call, result: Part) -> None:
        tool = self.dispatcher.tools.get(c.name)
        explicit = tool is not None and tool.explicit_read
        if self.assembler is not None and not explicit:
            # Other results of the turn share the room a read in the same turn may use.
            self.assembler.room.consume(len((result.rendered or "").encode()))


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
