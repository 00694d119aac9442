"""Code mode: `run_code`, a Python program in run_python's sandbox that calls tools over refs.

The program calls `tools.<name>(**args)` (sync; `tools.gather([(name, args), …])` runs several at
once), `tools.search("…")` and `help(tools.<name>)`; its inputs are `tools.inputs`. Each call
crosses one channel (`byref.tools.channel`) to the host, which dispatches it through the very
dispatcher that ran `run_code` (`ctx.calls`: scope, grants, policy, refs, placement, events; the
run's record keeps each inner call's lineage). The child never reaches the store, the
transcript, an upstream or the network: it has its end of a socket and nothing else.

Handles, not bytes: an inner result small enough to be inserted arrives as a Python value (an
upstream's structured value, not its text: `Tool.code_value`); one
the dispatcher placed (or a payload it stored) arrives as a handle — ref, kind, size, shape,
preview — whose data the program streams in chunks on demand, and which it passes to the next
call as an argument, where the host substitutes the ref (no bytes cross the channel). Refs the
model wrote into `inputs` are handles too. A handle is this run's alone: an id the run did not
issue is refused.

What comes back to the model is a `Blocks` result, each block placed by the usual rules: one
summary line (calls by name, refused, the record's ref), the printed output, the value of the
program's last expression if it is one, and the files it wrote (minted as run_python's). An inner
result the program did not print or return never reaches the context.

Limits: `CodeMode.max_calls` inner calls a run, each at most `call_timeout` seconds; the run's
wall clock covers its calls. A tool the policy keeps from code (`call_tool` 'off', or 'readOnly'
and not read-only), and code itself (no run starts another), is refused with the same words the
model would read; a refusal reaches the code as a catchable `tools.ToolError` and the summary,
with the reason dispatch gave it (`Part.reason`).
Where no sandbox can be made, `run_code` refuses as `run_python` does.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from byref.errors import RefusalReason
from byref.jsonview import dumps, encode
from byref.refs import Blob, RefRefusal, envelope, is_envelope, parse_model_envelope
from byref.store.port import ArtifactError, CanGetStream
from byref.tools import code_child
from byref.tools.blocks import Blocks
from byref.tools.call_context import ToolCalls, ToolContext
from byref.tools.channel import (
    READ_MAX,
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
from byref.tools.code import RUN_PYTHON, report_run
from byref.tools.runner import CodeRunner, Limits, StagingArea, SubprocessRunner
from byref.tools.sandbox import IsolationUnavailable
from byref.tools.tool import Tool, ToolRefusal
from byref.transcript import Part

RUN_CODE = "run_code"
_STDOUT_KEPT = 256 << 10
"""Printed output kept for placement (the runner reads at most this much of its tail)."""

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "A Python program that calls tools."},
        "inputs": {
            "type": "object",
            "description": "Name → a value, or a ref ({\"$ref\": …} or art_…): in the program "
                           "as tools.inputs[name] (a ref as a handle).",
            "additionalProperties": True,
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}


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

    limits: Limits = field(default_factory=lambda: Limits(max_stdout_chars=_STDOUT_KEPT))
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


def describe_tool(limits: Limits, mode: CodeMode) -> str:
    """The run_code tool's description."""
    return (
        "Run a Python program that calls tools, so their results need not pass through you. "
        "In the program, `tools.<name>(**args)` calls a tool and returns its result: a "
        "Python value, or for a large result a handle (.ref, .kind, .bytes, .shape, "
        ".preview; .chunks(), .lines(), .read(), .json() fetch its data) that you pass "
        "as an argument to the next call without reading it. `tools.gather([(name, args), "
        "...])` runs several calls at once; `tools.search('words')` finds tools; "
        "`help(tools.<name>)` shows a tool's parameters. A refused call raises "
        "tools.ToolError (catchable). `inputs` (name → value or ref) are in "
        "tools.inputs[name]. Only what the program prints, the value of its last expression "
        "and files written to os.environ['BYREF_OUTPUT_DIR'] come back to you. "
        f"At most {mode.max_calls} tool calls a run, each within {mode.call_timeout:g}s; "
        f"{limits.wall_seconds:g}s wall clock for the whole run, {limits.cpu_seconds}s CPU, "
        f"{limits.memory_bytes >> 20} MB memory. No network."
    )


def make_run_code_tool(*, runner: CodeRunner | None = None,
                       mode: CodeMode | None = None) -> Tool:
    """The `run_code` tool: runs model-written code in the sandbox with `tools` bound to the
    caller's own dispatch (see the module docstring)."""
    mode = mode or CodeMode()
    runner = runner or mode.runner or SubprocessRunner()
    limits = mode.limits

    def run_code(ctx: ToolContext, code: str, inputs: dict[str, Any] | None = None) -> Any:
        if ctx.calls is None:  # a Tool copied without calls_tools, or called outside dispatch
            raise ToolRefusal(f"Tool {RUN_CODE!r} can run only through byref's dispatch.",
                              "tool-refused")
        host = _Host(ctx, ctx.calls, mode)
        parents = host.take_inputs(inputs or {})
        host_end, child_end = socket.socketpair()
        with StagingArea() as stage, host_end:
            stage.manifest.write_bytes(b"{}")
            server = threading.Thread(target=host.serve, args=(host_end,),
                                      name=f"byref-code-{ctx.call_id}", daemon=True)
            server.start()
            try:
                outcome = runner.run(code, stage, limits, channel=child_end.detach(),
                                     bootstrap=_child_source())
            except IsolationUnavailable as exc:
                ctx.emit("refused", op="run", tool=RUN_CODE, reason="isolation-unavailable")
                raise ToolRefusal(
                    f"Tool {RUN_CODE!r} cannot run code on this host: code runs only in an "
                    f"isolated sandbox, and none can be made here ({exc.reason}). Answer "
                    "without running code.", "isolation-unavailable") from exc
            finally:
                with contextlib.suppress(OSError):
                    host_end.shutdown(socket.SHUT_RDWR)
                server.join(timeout=mode.call_timeout + 5)
                host.close()
            summary = host.summary(ctx.calls.keep_record())
            try:
                report = report_run(outcome, parents, ctx, limits, tool=RUN_CODE)
            except ToolRefusal as refusal:
                raise ToolRefusal(f"{refusal.text}\n{summary}", refusal.reason) from refusal
        blocks: list[Any] = [summary]
        if report["stdout"]:
            blocks.append(report["stdout"])
        if host.value is not None:
            blocks.append(host.value)
        if report["files"]:
            blocks.append({"files": report["files"]})
        return Blocks(tuple(blocks))

    return Tool(name=RUN_CODE, description=describe_tool(limits, mode), fn=run_code,
                input_schema=_SCHEMA, lazy=frozenset({"inputs"}), wants_ctx=True,
                calls_tools=True, capabilities=("code.python.run", "tools.call"),
                glossary=("script", "program", "batch", "loop", "orchestrate"))


@dataclass
class _Entry:
    """One handle this run issued: what stands for it in a call, and its data's cursor."""

    envelope: dict[str, Any]
    key: str | None
    info: dict[str, Any]
    offset: int = 0
    chunks: Any = None
    left: bytes = b""
    whole: bytes | None = None


class _Host:
    """The host's side of one run's channel: answers the child's requests, keeps its handles
    and counts its calls."""

    def __init__(self, ctx: ToolContext, calls: ToolCalls, mode: CodeMode) -> None:
        self.ctx = ctx
        self.calls = calls
        self.mode = mode
        self.handles: dict[str, _Entry] = {}
        self._by_key: dict[str, str] = {}
        self.inputs: dict[str, Any] = {}
        self.value: Any = None
        self.made: collections.Counter[str] = collections.Counter()
        self.refused: list[tuple[str, str]] = []
        self.broken: str | None = None
        self._lock = threading.Lock()
        self._write = threading.Lock()
        self._sock: socket.socket | None = None
        self._closed = False
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, mode.concurrency), thread_name_prefix="byref-code-call")

    # -- inputs --------------------------------------------------------------------------------
    def take_inputs(self, inputs: dict[str, Any]) -> list[Any]:
        """The model's inputs as the child will see them (refs as handles); the staged inputs'
        lineage for the files the run mints."""
        from byref.tools.runner import StagedInput

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
                self.inputs[name] = self._handle(envelope(ref), ref.key, {
                    "kind": meta.kind, "bytes": meta.bytes, "mediaType": meta.media_type})
                parents.append(StagedInput(name, Path(), meta.media_type, meta.bytes, ref.key,
                                           meta.kind))
            else:
                self.inputs[name] = self._handle(env, None, {"kind": "value"})
        return parents

    # -- serving -------------------------------------------------------------------------------
    def serve(self, sock: socket.socket) -> None:
        """Answer the child's requests until it closes the channel or breaks its protocol
        (then the channel is shut: the child's next request meets a closed channel)."""
        self._sock = sock
        reader = FrameReader(sock.fileno())
        try:
            while (request := reader.next()) is not None:
                self._answer_request(request)
        except ChannelError as exc:
            self.broken = str(exc)
            self.ctx.emit("refused", op="channel", tool=RUN_CODE, call_id=self.ctx.call_id,
                          reason="channel-protocol", detail=str(exc)[:300])
        except OSError:
            pass  # the run ended (the host shut the channel down)
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop answering: calls still running finish in the background, unanswered (the
        socket may be closed and its descriptor reused once this returns)."""
        with self._write:
            self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _answer_request(self, request: Request) -> None:
        if isinstance(request, Call):
            self._pool.submit(self._call, request)
        elif isinstance(request, Read):
            self._send(self._read(request))
        elif isinstance(request, Search):
            self._send(Answer(request.id, self.calls.search(request.query, request.limit)))
        elif isinstance(request, Describe):
            self._send(self._describe(request))
        elif isinstance(request, Done):
            try:
                self.value = self._refs_for_handles(request.value)
            except _UnknownHandle as exc:
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
    def _call(self, request: Call) -> None:
        try:
            self._send(self._run(request))
        except Exception as exc:  # a defect here must not end the serving thread's work
            self._send(Answer(request.id, error=f"byref could not process this call "
                              f"({type(exc).__name__})", reason="internal-error"))

    def _run(self, request: Call) -> Answer:
        name = request.tool[:80]
        with self._lock:
            over = sum(self.made.values()) >= self.mode.max_calls
            self.made[name] += 1
        if over:
            return self._refuse(request, name, "limit-calls", (
                f"Tool {name!r} was not called: this run has made its {self.mode.max_calls} "
                "tool calls, the most one run may make. Do more per call, or return what you "
                "have."))
        gated = self._gate(name)
        if gated is not None:
            return self._refuse(request, name, "not-permitted", gated)
        try:
            args = self._refs_for_handles(request.args)
        except _UnknownHandle as exc:
            return self._refuse(request, name, "bad-ref", (
                f"Tool {name!r} was not called: argument holds handle {exc.args[0]!r}, which "
                "this run was never given. Pass a handle a call or the inputs gave you."))
        future = self.calls.start(name, args)
        try:
            part = future.result(timeout=self.mode.call_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return self._refuse(request, name, "call-timeout", (
                f"Tool {name!r} did not finish within {self.mode.call_timeout:g}s, the limit "
                "for one call from code; its result was dropped."))
        if part.is_error:
            text = part.rendered if part.rendered is not None else str(part.value)
            return self._refuse(request, name, part.reason or "refused", text, emit=False)
        return Answer(request.id, self._for_child(part))

    def _refuse(self, request: Call, name: str, reason: RefusalReason, text: str, *,
                emit: bool = True) -> Answer:
        with self._lock:
            self.refused.append((name, reason))
        if emit:
            self.ctx.emit("refused", op="code-call", tool=name[:200], reason=reason,
                          call_id=f"{self.ctx.call_id}.?", run=self.ctx.call_id)
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

    # -- values and handles --------------------------------------------------------------------
    def _for_child(self, part: Part) -> Any:
        derived = part.derived.get("value")
        value = part.value
        if (isinstance(derived, Blob) and derived.key is not None and isinstance(value, dict)
                and (value.get("placed") is True or value.get("opaque") is True)):
            return self._stored(derived.key, value)
        found = self.calls.tool(part.tool) if part.tool is not None else None
        if found is not None:  # an upstream's JSON result arrives as its value, not its text
            value = found.code_value(value, part.call_id)
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("opaque") is True and is_envelope(value.get("value")):
                ref = parse_model_envelope(value["value"])
                if isinstance(ref, Blob) and ref.key is not None:
                    return self._stored(ref.key, value)
            if is_envelope(value):
                ref = parse_model_envelope(value)
                if isinstance(ref, Blob) and ref.key is not None:
                    return self._stored(ref.key, {})
                return self._handle(value, None, {"kind": "ref"})
            return {k: self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        return value

    def _stored(self, key: str, shown: Mapping[str, Any]) -> dict[str, Any]:
        preview = shown.get("preview")
        info = {"kind": shown.get("kind"), "bytes": shown.get("bytes"),
                "mediaType": shown.get("mediaType"), "shape": shown.get("shape"),
                "preview": preview if isinstance(preview, str | None) else dumps(preview)}
        if info["kind"] is None and self.ctx.has_artifacts:
            meta = self.ctx.artifacts.head(key)
            if meta is not None:
                info |= {"kind": meta.kind, "bytes": meta.bytes, "mediaType": meta.media_type}
        return self._handle(envelope(Blob(key=key)), key, info)

    def _handle(self, env: dict[str, Any], key: str | None,
                info: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            hid = self._by_key.get(key) if key is not None else None
            if hid is None:
                hid = f"h{len(self.handles) + 1}"
                shown = {k: v for k, v in info.items() if v is not None}
                self.handles[hid] = _Entry(env, key, {"id": hid, "ref": key, **shown})
                if key is not None:
                    self._by_key[key] = hid
        return {"$handle": self.handles[hid].info}

    def _refs_for_handles(self, value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and "$handle" in value:
                hid = value["$handle"]
                entry = self.handles.get(hid) if isinstance(hid, str) else None
                if entry is None:
                    raise _UnknownHandle(str(hid)[:40])
                return entry.envelope
            return {k: self._refs_for_handles(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._refs_for_handles(v) for v in value]
        return value

    def _read(self, request: Read) -> Answer:
        entry = self.handles.get(request.handle)
        if entry is None:
            return Answer(request.id, error=f"handle {request.handle[:40]!r} was never given "
                          "to this run", reason="bad-ref")
        size = max(0, min(request.size, READ_MAX))
        try:
            return Answer(request.id, self._bytes(entry, max(0, request.offset), size))
        except (RefRefusal, ArtifactError) as exc:
            return Answer(request.id, error=f"handle {request.handle!r} cannot be read: {exc}",
                          reason="missing-or-expired")

    def _bytes(self, entry: _Entry, offset: int, size: int) -> bytes:
        if entry.key is None or not isinstance(self.ctx.store, CanGetStream):
            if entry.whole is None:
                value = self.ctx.resolver.value(parse_model_envelope(entry.envelope))
                entry.whole = (value if isinstance(value, bytes) else
                               value.encode() if isinstance(value, str) else encode(value))
            return entry.whole[offset:offset + size]
        if entry.chunks is None or offset != entry.offset:
            streamed = self.ctx.store.get_stream(self.ctx.scope, entry.key)
            if streamed is None:
                raise ArtifactError(f"{entry.key!r} is missing or expired")
            entry.chunks, entry.left, entry.offset = streamed.chunks, b"", 0
            while entry.offset < offset:  # a reader that jumped: read forward to it
                skipped = self._take(entry, offset - entry.offset)
                if not skipped:
                    break
        return self._take(entry, size)

    @staticmethod
    def _take(entry: _Entry, size: int) -> bytes:
        while len(entry.left) < size:
            chunk = next(entry.chunks, b"")
            if not chunk:
                break
            entry.left += chunk
        out, entry.left = entry.left[:size], entry.left[size:]
        entry.offset += len(out)
        return out

    def _describe(self, request: Describe) -> Answer:
        if not request.tool:
            return Answer(request.id, {"tools": self.calls.names(), "inputs": self.inputs})
        found = self.calls.tool(request.tool)
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
        """The one line the model reads about the inner calls."""
        total = sum(self.made.values())
        names = ", ".join(f"{name} ×{n}" for name, n in self.made.most_common(8))
        if len(self.made) > 8:
            names += f", {len(self.made) - 8} more tools"
        refused = collections.Counter(f"{n} ({why})" for n, why in self.refused)
        said = ("none refused" if not refused else "refused: " + ", ".join(
            f"{what} ×{n}" for what, n in refused.most_common(5)))
        line = f"[{RUN_CODE}] {total} tool call{'s' if total != 1 else ''}"
        line += f" ({names}); {said}" if total else ""
        if self.broken is not None:
            line += f"; the tool channel was closed: {self.broken[:200]}"
        if record is not None:
            line += f"; record {record}"
        return line + "."


@functools.cache
def _child_source() -> str:
    """The sandboxed side's source, read on the first run (not when byref.tools is imported)."""
    return Path(code_child.__file__).read_text()


class _UnknownHandle(Exception):
    """An argument names a handle this run never issued."""


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


