"""Code mode's host: the side of one run's channel outside the sandbox, and the rules it keeps.

Owns `CodeMode` (the sandbox's limits, the inner calls' cap, timeout, gate and concurrency) and
`CodeHost`, which answers the child's requests — a call dispatched through the caller's own
`ctx.calls`, a handle's bytes (`code_handles`), a search, a tool's help, the program's return
value — and counts its calls for the summary line the model reads.

The law: the host trusts nothing the child sends and gives it only what its calls and inputs
gave it. A call the policy keeps from code, or over `max_calls`, is refused with the words the
model would read, never run; a call past `call_timeout`, or still running when the run ends, is
given up on (`ToolCalls.stop`: cancelled where it can be, recorded so). The run's calls hold at
most `concurrency` places at once, running and starting together: the host reads no further
frame while they are all taken (the child's writes wait in the socket), so what one run makes
the host hold is that many requests of at most `MAX_FRAME` bytes and `MAX_VALUES` values. A
sync tool on a thread cannot be stopped: it keeps its place until it returns, and once such
calls take every place a further call is refused at once. Nothing the child sends raises out
of the serving thread: a defect answering it is an internal-error answer, and a frame that
breaks the protocol closes the channel with words the summary carries.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from byref.errors import RefusalReason
from byref.refs import Blob, RefRefusal, envelope, is_envelope, parse_model_envelope
from byref.tools.call_context import ToolCalls, ToolContext
from byref.tools.code_mode.channel import (
    Answer,
    Call,
    ChannelError,
    Describe,
    Done,
    FrameReader,
    Read,
    Request,
    Search,
    frame,
    write_all,
)
from byref.tools.code_mode.code_handles import Handles, UnknownHandle
from byref.tools.run_python.code import RUN_PYTHON
from byref.tools.run_python.runner import CodeRunner, Limits
from byref.tools.tool import Tool, ToolRefusal
from byref.transcript import Part

RUN_CODE = "run_code"
STDOUT_KEPT = 256 << 10
"""Printed output kept for placement (the runner reads at most this much of its tail)."""
CLOSE_WAIT = 5.0
"""Seconds the run's end waits for its calls in flight to be given up on and recorded."""


def hinted_read_only(tool: Tool) -> bool:
    """Read-only by its MCP annotations (`readOnlyHint`), as the gateway's call_tool judges."""
    meta = getattr(tool, "mcp_meta", None)
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True


@dataclass(frozen=True, slots=True)
class CodeMode:
    """How `run_code` runs: the sandbox's limits, the inner calls' cap and timeout, which tools
    code may call (`call_tool`: 'all', 'readOnly' (those `read_only` says), or 'off'), and how
    many run at once."""

    limits: Limits = field(default_factory=lambda: Limits(max_stdout_chars=STDOUT_KEPT))
    max_calls: int = 500
    call_timeout: float = 30.0
    call_tool: Literal["all", "readOnly", "off"] = "all"
    read_only: Callable[[Tool], bool] = hinted_read_only
    concurrency: int = 8
    runner: CodeRunner | None = None
    """The sandbox runner (default: a `SubprocessRunner` that requires isolation)."""
    refuse: Callable[[Tool], str | None] | None = None
    """The embedder's own gate (the gateway's byref.codeMode): the words refusing a tool from
    code, or None to let dispatch decide; asked after the gates above."""


class CodeHost:
    """The host's side of one run's channel: answers the child's requests, keeps its handles
    and counts its calls."""

    def __init__(self, ctx: ToolContext, calls: ToolCalls, mode: CodeMode) -> None:
        self.ctx = ctx
        self.calls = calls
        self.mode = mode
        self.handles = Handles(ctx)
        self.inputs: dict[str, Any] = {}
        self.value: Any = None
        self.made: collections.Counter[str] = collections.Counter()
        """Calls that ran and answered with a value, by tool."""
        self.asked = 0
        """Calls the program asked for (what `max_calls` caps)."""
        self.refused: list[tuple[str, str]] = []
        self.broken: str | None = None
        self.straggling = 0
        """Calls given up on that still run (sync tools on threads cannot be stopped)."""
        self.running = 0
        """Calls started and not yet answered; with `straggling`, the places taken."""
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._write = threading.Lock()
        self._sock: socket.socket | None = None
        self._closed = False
        self._ended: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._answering: list[concurrent.futures.Future[None]] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, mode.concurrency), thread_name_prefix="byref-code-call")

    # -- inputs --------------------------------------------------------------------------------
    def take_inputs(self, inputs: dict[str, Any]) -> list[Any]:
        """The model's inputs as the child will see them (refs as handles); the staged inputs'
        lineage for the files the run mints."""
        from byref.tools.run_python.runner import StagedInput

        parents: list[Any] = []
        for name, value in inputs.items():
            key = value if isinstance(value, str) and value.startswith("art_") else None
            if key is None and not is_envelope(value):
                self.inputs[name] = value
                continue
            env = envelope(Blob(key=key)) if key is not None else value
            try:
                ref = parse_model_envelope(env)
            except RefRefusal as exc:
                raise ToolRefusal(f"Input {name!r} is a reference that cannot be used. {exc}",
                                  "bad-ref") from exc
            if isinstance(ref, Blob) and ref.key is not None:
                meta = self.ctx.artifacts.head(ref.key) if self.ctx.has_artifacts else None
                if meta is None:
                    raise ToolRefusal(
                        f"Tool {RUN_CODE!r} was not executed: input {name!r} = {ref.key!r} is "
                        "not available (missing, expired, or not stored in this session).",
                        "missing-or-expired")
                self.inputs[name] = self.handles.issue(envelope(ref), ref.key, {
                    "kind": meta.kind, "bytes": meta.bytes, "mediaType": meta.media_type})
                parents.append(StagedInput(name, Path(), meta.media_type, meta.bytes, ref.key,
                                           meta.kind))
            else:
                self.inputs[name] = self.handles.issue(env, None, {"kind": "value"})
        return parents

    # -- serving -------------------------------------------------------------------------------
    def serve(self, sock: socket.socket) -> None:
        """Answer the child's requests until it closes the channel or breaks its protocol
        (then the channel is shut: the child's next request meets a closed channel)."""
        self._sock = sock
        reader = FrameReader(sock.fileno())
        try:
            while True:
                self._wait_for_place()
                request = reader.next()
                if request is None:
                    break
                self._answer_request(request)
        except ChannelError as exc:
            self._break(str(exc))
        except OSError:
            pass  # the run ended (the host shut the channel down)
        except Exception as exc:  # a defect of ours: the channel ends, saying so
            self._break(f"byref could not serve the tool channel ({type(exc).__name__})")
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _wait_for_place(self) -> None:
        """Wait, before reading the next frame, until a place is free or none can free up
        (every place held by a call that cannot be stopped: the next call is refused at once).
        Bounded: a running call is answered within `call_timeout`, or the run ends."""
        with self._freed:
            while (self.running + self.straggling >= self.mode.concurrency
                   and self.running > 0 and not self._ended.done()):
                self._freed.wait(self.mode.call_timeout)

    def _break(self, why: str) -> None:
        self.broken = why
        self.ctx.emit("refused", op="channel", tool=RUN_CODE, call_id=self.ctx.call_id,
                      reason="channel-protocol", detail=why[:300])

    def end(self) -> None:
        """The run is over: calls still waiting give up, and the serving thread stops waiting
        for places."""
        with self._freed:
            if not self._ended.done():
                self._ended.set_result(None)
            self._freed.notify_all()

    def close(self) -> None:
        """Stop answering (the socket may be closed and its descriptor reused once this
        returns) and give up on the calls still running: each is cancelled where it can be and
        recorded so; waited for at most `CLOSE_WAIT` seconds."""
        with self._write:
            self._closed = True
        self.end()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            answering = list(self._answering)
        concurrent.futures.wait(answering, timeout=CLOSE_WAIT)

    def _answer_request(self, request: Request) -> None:
        try:
            self._answer(request)
        except Exception as exc:  # a defect answering must not end the serving thread
            self._send(Answer(request.id, error=f"byref could not answer this request "
                              f"({type(exc).__name__})", reason="internal-error"))

    def _answer(self, request: Request) -> None:
        if isinstance(request, Call):
            with self._lock:
                self.asked += 1
                over = self.asked > self.mode.max_calls
                stuck = self.running + self.straggling >= self.mode.concurrency
                if not over and not stuck:
                    self.running += 1
            if over or stuck:
                self._send(self._refuse_at_once(request, over=over))
                return
            try:
                with self._lock:
                    self._answering.append(self._pool.submit(self._call, request))
            except RuntimeError:  # the run ended: the pool takes no more calls
                self._release()
        elif isinstance(request, Read):
            self._send(self.handles.read(request))
        elif isinstance(request, Search):
            self._send(Answer(request.id, self.calls.search(request.query, request.limit)))
        elif isinstance(request, Describe):
            self._send(self._describe(request))
        elif isinstance(request, Done):
            try:
                self.value = self.handles.refs(request.value, returned=True)
            except UnknownHandle as exc:
                self._send(Answer(request.id, error=f"the return value holds handle "
                                  f"{exc.args[0]!r}, which this run was never given",
                                  reason="bad-ref"))
                return
            self._send(Answer(request.id, True))

    def _send(self, answer: Answer) -> None:
        try:
            data = frame(answer)
        except (TypeError, ValueError) as exc:
            data = frame(Answer(answer.id, error=f"the answer could not be sent ({exc})",
                                reason="unserializable-result"))
        with self._write, contextlib.suppress(OSError):
            if not self._closed and self._sock is not None:
                write_all(self._sock.fileno(), data)

    # -- one inner call ------------------------------------------------------------------------
    def _refuse_at_once(self, request: Call, *, over: bool) -> Answer:
        name = request.tool[:80]
        if over:
            return self._refuse(request, name, "limit-calls", (
                f"Tool {name!r} was not called: this run has made its {self.mode.max_calls} "
                "tool calls, the most one run may make. Do more per call, or return what you "
                "have."))
        return self._refuse(request, name, "limit-calls", (
            f"Tool {name!r} was not called: calls from this run still running past their "
            "time (a tool on a thread cannot be stopped) fill the places for calls at once "
            f"({self.mode.concurrency}). Return what you have."))

    def _release(self) -> None:
        with self._freed:
            self.running -= 1
            self._freed.notify_all()

    def _call(self, request: Call) -> None:
        try:
            answer = self._run(request)
        except Exception as exc:  # a defect here must not end the serving thread's work
            answer = Answer(request.id, error=f"byref could not process this call "
                            f"({type(exc).__name__})", reason="internal-error")
        finally:
            self._release()  # a call given up on but still running keeps `straggling`'s place
        self._send(answer)

    def _run(self, request: Call) -> Answer:
        name = request.tool[:80]
        gated = self._gate(name)
        if gated is not None:
            return self._refuse(request, name, "not-permitted", gated)
        try:
            args = self.handles.refs(request.args)
            server_refs = self.handles.server_built(request.args)
        except UnknownHandle as exc:
            return self._refuse(request, name, "bad-ref", (
                f"Tool {name!r} was not called: argument holds handle {exc.args[0]!r}, which "
                "this run was never given. Pass a handle a call or the inputs gave you."))
        future = self.calls.start(name, args, server_refs)
        either: list[concurrent.futures.Future[Any]] = [future, self._ended]
        concurrent.futures.wait(either, timeout=self.mode.call_timeout,
                                return_when=concurrent.futures.FIRST_COMPLETED)
        if not future.done():
            return self._give_up(request, name, future)
        part = future.result()
        if part.is_error:
            text = part.rendered if part.rendered is not None else str(part.value)
            return self._refuse(request, name, part.reason or "refused", text, emit=False)
        answer = Answer(request.id, self._for_child(part))
        with self._lock:
            self.made[name] += 1
        return answer

    def _give_up(self, request: Call, name: str, future: concurrent.futures.Future[Part]
                 ) -> Answer:
        """A call past its time, or still running at the run's end: stopped, recorded so."""
        why = ("did not finish before the run ended" if self._ended.done() else
               f"did not finish within {self.mode.call_timeout:g}s, the limit for one call "
               "from code")
        part, cancelled = self.calls.stop(future, "call-timeout", why)
        if not cancelled:
            with self._lock:
                self.straggling += 1
            future.add_done_callback(self._returned)
        return self._refuse(request, name, "call-timeout", str(part.value),
                            call_id=part.call_id,
                            detail="cancelled" if cancelled else "still running on a thread")

    def _returned(self, _: concurrent.futures.Future[Part]) -> None:
        with self._freed:
            self.straggling -= 1
            self._freed.notify_all()

    def _refuse(self, request: Call, name: str, reason: RefusalReason, text: str, *,
                emit: bool = True, call_id: str | None = None,
                detail: str | None = None) -> Answer:
        with self._lock:
            self.refused.append((name, reason))
        if emit:
            self.ctx.emit("refused", op="code-call", tool=name[:200], reason=reason,
                          call_id=call_id or f"{self.ctx.call_id}.?", run=self.ctx.call_id,
                          **({"detail": detail} if detail is not None else {}))
        return Answer(request.id, error=text, reason=reason)

    def _gate(self, name: str) -> str | None:
        """Why the policy keeps code from calling `name` (None: dispatch decides)."""
        found = self.calls.tool(name)
        if found is None:
            return None  # dispatch refuses it, naming the tools there are
        if found.calls_tools or name in (RUN_CODE, RUN_PYTHON):
            return (f"Tool {name!r} was not called: code cannot start another program; do the "
                    "work in this one.")
        if self.mode.call_tool == "off":
            return (f"Tool {name!r} was not called: tools cannot be called from code here "
                    "(callTool is 'off'); call it yourself.")
        if self.mode.call_tool == "readOnly" and not self.mode.read_only(found):
            return (f"call_tool runs only read-only tools here (byref.callTool is 'readOnly'); "
                    f"{name!r} may change things: load it with activate_tool and call it by its "
                    "own name, so your client can ask the user first.")
        if self.mode.refuse is not None:
            return self.mode.refuse(found)
        return None

    def _for_child(self, part: Part) -> Any:
        derived = part.derived.get("value")
        value = part.value
        if (isinstance(derived, Blob) and derived.key is not None and isinstance(value, dict)
                and (value.get("placed") is True or value.get("opaque") is True)):
            return self.handles.stored(derived.key, value)
        found = self.calls.tool(part.tool) if part.tool is not None else None
        if found is not None:  # an upstream's JSON result arrives as its value, not its text
            value = found.code_value(value, part.call_id)
        return self.handles.walk(value, part.derived)

    def _describe(self, request: Describe) -> Answer:
        if not request.tool:
            return Answer(request.id, {"tools": self.calls.names(), "inputs": self.inputs})
        found = self.calls.tool(request.tool)
        if found is None and (starting := self.calls.unknown(request.tool)) is not None:
            # The child's `tools.<name>` is then a function that calls it: the words the call
            # gets now (still starting), or the tool itself once its server is up.
            return Answer(request.id, error=starting, reason="still-starting")
        if found is None:
            near = [r["name"] for r in self.calls.search(request.tool, 3)]
            return Answer(request.id, error=f"there is no tool {request.tool[:80]!r}; near: "
                          f"{near!r}; find tools with tools.search('...')",
                          reason="unknown-tool")
        return Answer(request.id, {"name": found.name, "signature": signature(found),
                                   "description": found.description,
                                   "input_schema": found.input_schema})

    # -- the summary ---------------------------------------------------------------------------
    def summary(self, record: str | None) -> str:
        """The one line the model reads about the inner calls: those that ran, by tool, and
        those refused (or failed), by tool and reason."""
        total = sum(self.made.values())
        names = ", ".join(f"{name} ×{n}" for name, n in self.made.most_common(8))
        if len(self.made) > 8:
            names += f", {len(self.made) - 8} more tools"
        refused = collections.Counter(f"{n} ({why})" for n, why in self.refused)
        said = ("none refused" if not refused else "refused: " + ", ".join(
            f"{what} ×{n}" for what, n in refused.most_common(5)))
        line = f"[{RUN_CODE}] {total} tool call{'s' if total != 1 else ''}"
        line += f" ({names})" if total else ""
        line += f"; {said}" if total or refused else ""
        if self.broken is not None:
            line += f"; the tool channel was closed: {self.broken[:200]}"
        if record is not None:
            line += f"; record {record}"
        return line + "."


def signature(tool: Tool) -> str:
    """`name(a: string, b: integer = …)` from a tool's input schema."""
    props = tool.input_schema.get("properties", {})
    required = set(tool.input_schema.get("required", ()))
    params = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, dict) else "any"
        kind = "|".join(kind) if isinstance(kind, list) else kind
        params.append(f"{name}: {kind}" + ("" if name in required else " = …"))
    return f"{tool.name}({', '.join(params)})"
