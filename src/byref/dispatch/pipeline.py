"""The per-call pipeline: parse → validate → wants → resolve → execute → intercept payloads →
place → record → events.

The law: a call either runs with every argument delivered exactly, or does not run and the model
is told what went wrong in words it can act on (a refusal, `is_error` set, a `refused` event with
its reason). Nothing is recorded half: artifacts minted by a call whose result cannot be recorded
are deleted again (`outbound/recording.py`). Nothing raises out of `dispatch` or `adispatch`.

Two paths, one pipeline: `dispatch` (synchronous) and `adispatch` (on an event loop) call the
same three stages — `_prepare` (every check and resolution before the tool runs), the tool
itself (`_failures` turns its failure into a refusal), and `Recorder` — and differ only in
where each stage runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from byref.dispatch.calls import REFUSAL_MAX as REFUSAL_MAX
from byref.dispatch.calls import Call as Call
from byref.dispatch.calls import Refusal as Refusal
from byref.dispatch.calls import clip, escaped
from byref.dispatch.hooks import Hooks
from byref.dispatch.inbound.arguments import Arguments
from byref.dispatch.nested import InnerDone, NestedCalls, Search
from byref.dispatch.outbound.placement import settle
from byref.dispatch.outbound.recording import Recorder
from byref.dispatch.outbound.reflines import with_line
from byref.dispatch.policy import Policy
from byref.dispatch.threads import Threads
from byref.errors import InvalidValue
from byref.events import Emitter
from byref.jsonview import unrecordable
from byref.refs import (
    Ref,
    RefRefusal,
    is_envelope,
    quote,
)
from byref.resolve import Caps, Resolver
from byref.store import ArtifactStore, Scope
from byref.tools.call_context import ToolContext
from byref.tools.tool import Tool, ToolRefusal
from byref.transcript import Part, Transcript

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Ready:
    """A call that passed every stage before execution: the tool, its arguments, its context."""

    tool: Tool
    args: dict[str, Any]
    ctx: ToolContext


class Dispatcher:
    """Runs model tool calls end to end: finds the tool, resolves refs, validates, runs, and
    settles the result; anything a model writes or a tool does comes back as a result or a
    refusal, never an exception."""
    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        transcript: Transcript,
        store: ArtifactStore | None,
        scope: Scope,
        policy: Policy | None = None,
        caps: Caps | None = None,
        emit: Emitter | None = None,
        hooks: Hooks | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        hooks = hooks or Hooks()
        self.unknown_tool = hooks.unknown_tool
        self.search: Search | None = hooks.search
        self.inner_done: InnerDone | None = hooks.inner_done
        self.threads: Threads | None = hooks.threads
        if len(self.tools) != len(tools):
            names = [t.name for t in tools]
            dupes = sorted({n for n in names if names.count(n) > 1})
            raise InvalidValue(f"Tool names must be unique; repeated: {dupes!r}.")
        needy = sorted(t.name for t in tools if t.wants)
        if needy and store is None:
            raise InvalidValue(
                f"Tool(s) {needy!r} declare `wants` but no artifact store is attached; pass "
                "store=MemoryStore() (or any ArtifactStore) when building the agent."
            )
        self.transcript = transcript
        self.store = store
        self.scope = scope
        self.policy = policy or Policy()
        self.caps = caps or Caps()
        self.emit = emit or Emitter()
        self.resolver = Resolver(transcript, store, scope, caps=self.caps, emit=self.emit)
        self.recorder = Recorder(self.policy, store, scope, self.emit)
        self.arguments = Arguments(self)
        self._async: dict[str, tuple[Any, bool]] = {}
        """Tool name → (its function, whether it is async), see `_is_async`."""

    def declarations(self, *, leave_out: Container[str] = ()) -> list[dict[str, Any]]:
        """Tool declarations, name-sorted, byte-stable across turns; tools named in `leave_out`
        stay callable but undeclared."""
        self.refresh()
        ordered = sorted((t for t in self.tools.values() if t.name not in leave_out),
                         key=lambda t: t.name)
        if self.policy.refs:
            return [t.declaration() for t in ordered]
        return [t.plain_declaration() for t in ordered]

    def refresh(self) -> None:
        """Let tools with live descriptions (run_python's inventory) update before a request."""
        for t in self.tools.values():
            if t.refresh is not None:
                t.refresh()

    # -- recording the call --------------------------------------------------------------------
    def call_part(self, call: Call) -> Part:
        """The transcript part for a call; `$ref` arguments are recorded as derived fields."""
        call = call.recordable()
        derived: dict[str, Ref] = {}
        if self.policy.refs and isinstance(call.input, dict):
            for name, value in call.input.items():
                # A ref that does not parse is recorded verbatim and refused at dispatch.
                if is_envelope(value):
                    with contextlib.suppress(RefRefusal):
                        derived[f"input.{name}"] = self.arguments.parse_ref(
                            value, name in call.server_refs)
        return Part(
            type="tool_call", value={"name": call.name, "id": call.id, "input": call.input},
            tool=call.name, call_id=call.id, derived=derived,
        )

    # -- running it ----------------------------------------------------------------------------
    def dispatch(self, call: Call, *, call_seq: int, seq: int, part: int) -> Part:
        """Run `call` (recorded at `call_seq`); its result will be message `seq`, part `part`.

        Never raises for anything the model wrote or a tool returned: that is a refusal for the
        model and a `refused` event for the operator. An async tool is run to completion here
        when no event loop is running (inside one, use `adispatch`).
        """
        return self._dispatch(call, call_seq, seq, part, None)

    def _dispatch(self, call: Call, call_seq: int, seq: int, part: int,
                  loop: asyncio.AbstractEventLoop | None) -> Part:
        """`dispatch`; `loop` is the event loop a tool's inner calls run on (code mode)."""
        try:
            try:
                ready = self._prepare(call, call_seq, loop)
                value = self._execute(ready)
            except Refusal as refusal:
                return self._refused(call, refusal, at=(seq, part))
            return self.recorder.record(ready.tool, call, value, seq=seq, part=part)
        except Exception as exc:  # a defect below dispatch must not end the caller's loop
            return self._internal_error(call, exc)

    async def adispatch(self, call: Call, *, call_seq: int, seq: int, part: int) -> Part:
        """`dispatch` for a caller on an event loop: the same stages, refusals and events.

        An async tool is awaited on the loop, and only the stages that may block go to a worker
        thread: resolving refs or redeeming `wants` (the store may be files or a database) and
        recording a result that carries payloads or is placed. A plain call — no refs, a small
        result — makes no thread hop. A sync tool runs with its whole pipeline in one worker
        thread. Never raises, as `dispatch` (cancellation still propagates).
        """
        try:
            found = self.tools.get(call.name) if isinstance(call.name, str) else None
            if found is None or not self._is_async(found):
                try:
                    return await self._off_loop(call, found, functools.partial(
                        self._dispatch, call, call_seq, seq, part, asyncio.get_running_loop()))
                except Refusal as refusal:  # its lane refused it: no thread was taken
                    return self._refused(call, refusal, at=(seq, part))
            try:
                loop = asyncio.get_running_loop()
                if self.arguments.resolves(found, call.input):
                    ready = await self._off_loop(call, found, functools.partial(
                        self._prepare, call, call_seq, loop))
                else:
                    ready = self._prepare(call, call_seq, loop)
                with self._failures(ready.tool):
                    value = await ready.tool.ainvoke(ready.args, ready.ctx)
            except Refusal as refusal:
                return self._refused(call, refusal, at=(seq, part))
            return await self.recorder.arecord(ready.tool, call, value, seq=seq, part=part)
        except Exception as exc:  # as in dispatch: a defect is a refusal, not a crash
            return self._internal_error(call, exc)

    async def _off_loop(self, call: Call, tool: Tool | None, fn: Callable[[], T]) -> T:
        """`fn()` on a worker thread, in the lane `threads` gives `call` (see `Threads`)."""
        # anyio comes with the `mcp` extra, not the core: imported by the async path alone.
        from anyio import to_thread

        if self.threads is None:
            return await to_thread.run_sync(fn)
        async with self.threads.enter(call, tool) as limiter:
            return await to_thread.run_sync(fn, limiter=limiter)

    def _is_async(self, tool: Tool) -> bool:
        # `Tool.is_async` inspects the function twice (~1.5 us a call): asked once per function.
        fn = tool.fn
        known = self._async.get(tool.name)
        if known is None or known[0] is not fn:
            known = self._async[tool.name] = (fn, tool.is_async)
        return known[1]

    def _internal_error(self, call: Call, exc: Exception) -> Part:
        self.emit("refused", op="dispatch", tool=escaped(call.name)[:200],
                  call_id=escaped(call.id)[:200], reason="internal-error",
                  detail=f"{type(exc).__name__}: {escaped(str(exc))[:500]}")
        return self._refused(call, Refusal(
            f"Tool {quote(call.name)} did not run: byref could not process this call "
            f"({type(exc).__name__}). Nothing was kept; try again or another way.",
            "internal-error"), emit=False)

    # -- before the tool runs ------------------------------------------------------------------
    def _prepare(self, call: Call, call_seq: int,
                 loop: asyncio.AbstractEventLoop | None = None) -> _Ready:
        """Every stage before execution; raises `Refusal` when the tool must not run."""
        problem = (unrecordable(call.name, where="the tool name")
                   or unrecordable(call.id, where="the call id")
                   or unrecordable(call.input, where="the input"))
        if problem is not None:
            raise Refusal(
                f"Tool {quote(call.recordable().name)} did not run: {problem}. Write the "
                "value as valid UTF-8 text (or a number of at most a few thousand digits).",
                "invalid-input", detail=problem)
        tool = self._tool(call.name)
        args, wanted = self.arguments.read(tool, call, call_seq)
        ctx = ToolContext(self.resolver, self.store, self.scope, self.transcript, self.emit,
                          tool.name, call.id, wanted)
        if tool.calls_tools:
            ctx.calls = NestedCalls(self, call, call_seq, loop)
        return _Ready(tool, args, ctx)

    def _refused(self, call: Call, refusal: Refusal, *, emit: bool = True,
                 at: tuple[int, int] | None = None) -> Part:
        """The error part for `refusal`. One carrying the tool's own error content that the
        model is shown whole (`result`, at most `REFUSAL_MAX` characters) records it as its value
        and, recorded at message `at`, ends with the ref line naming it, as an inline result
        does; byref's own refusals (the tool did not run) have nothing to pass on."""
        call = call.recordable()
        if emit:
            self.emit("refused", op="dispatch", tool=call.name, call_id=call.id,
                      reason=refusal.reason, ref=refusal.ref, detail=clip(refusal.detail),
                      **({"code": refusal.code} if refusal.code is not None else {}))
        text = self.error_text(call, clip(escaped(refusal.text), REFUSAL_MAX) or "")
        own = escaped(refusal.result) if refusal.result is not None else None
        if own is None or at is None or not self.policy.refs or len(own) > REFUSAL_MAX \
                or text != escaped(refusal.text):  # cut: what it names was not shown whole
            return Part(type="tool_result", value=text, rendered=text,
                        tool=call.name, call_id=call.id, is_error=True, reason=refusal.reason)
        return with_line(Part(type="tool_result", value=own, rendered=text, tool=call.name,
                              call_id=call.id, is_error=True, reason=refusal.reason), *at)

    def _tool(self, name: str) -> Tool:
        if name in self.tools:
            return self.tools[name]
        hint = self.unknown_tool(name) if self.unknown_tool is not None else None
        if hint is not None:
            raise Refusal(hint, "unknown-tool")
        close = difflib.get_close_matches(name[:200], list(self.tools), n=3)
        names = close or sorted(self.tools)[:10]
        raise Refusal(
            f"There is no tool {quote(name)}. Tools you can call: {', '.join(map(repr, names))}.",
            "unknown-tool",
        )

    # -- the tool ------------------------------------------------------------------------------
    def _execute(self, ready: _Ready) -> Any:
        with self._failures(ready.tool):
            return ready.tool.invoke(ready.args, ready.ctx)

    @contextlib.contextmanager
    def _failures(self, tool: Tool) -> Iterator[None]:
        """A tool's own failure is reported to the model, not raised (both paths)."""
        try:
            yield
        except ToolRefusal as exc:
            raise Refusal(exc.text, exc.reason, code=exc.code, result=exc.result) from exc
        except RefRefusal as exc:
            raise Refusal(f"Tool {tool.name!r} could not complete: {exc}", "bad-ref") from exc
        except Exception as exc:
            raise Refusal(
                f"Tool {tool.name!r} failed: {type(exc).__name__}: {clip(str(exc), 600)}",
                "tool-error",
            ) from exc

    # -- after it ------------------------------------------------------------------------------
    def error_text(self, call: Call, text: str) -> str:
        """Errors are never placed; the net still bounds them."""
        return settle(text, text, tool=call.name, ceiling=None, result_kind=None, is_error=True,
                      policy=self.policy, store=self.store, scope=self.scope).text
