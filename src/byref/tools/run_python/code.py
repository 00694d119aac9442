"""`run_python`: Python over data the model never pasted, with lineage for what it produces.

The law: inputs are refs, redeemed by the runner's host and staged as files (streamed from the
store, never through the model); the code is told where they are by a JSON manifest whose path is
in `BYREF_INPUTS`, and writes results to `BYREF_OUTPUT_DIR`. Every produced file is minted as
`file/<ext>` with its true byte count and `parentRefs` from the inputs it resolved — absent, not
empty, when none; a parent that expired mid-run fails that file's mint, stated in the result.
The description carries the installed package inventory, refreshed on a timer.
"""

from __future__ import annotations

import contextlib
import mimetypes
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from byref.errors import RefusalReason
from byref.jsonview import encode
from byref.refs import Blob, MessageRef, RefRefusal, is_envelope, parse_model_envelope
from byref.store.port import ArtifactError, ArtifactIntegrityError, CanGetStream
from byref.tools.call_context import ToolContext
from byref.tools.run_python.runner import (
    CodeRunner,
    Limits,
    RunOutcome,
    StagedInput,
    StagingArea,
    SubprocessRunner,
    prepare,
)
from byref.tools.run_python.sandbox import IsolationUnavailable
from byref.tools.tool import Tool, ToolRefusal

RUN_PYTHON = "run_python"
_LIMIT_WORDS = {
    "cpu": "its CPU-time limit", "memory": "its memory limit", "wall": "its wall-clock limit",
    "disk": "its disk limit", "file-size": "its file-size limit",
    "processes": "its process-count limit",
    "output-files": "the output file-count limit",
    "output-bytes": "the output size limit",
}
_LIMIT_REASONS: dict[str, RefusalReason] = {
    "cpu": "limit-cpu", "memory": "limit-memory", "wall": "limit-wall", "disk": "limit-disk",
    "file-size": "limit-file-size", "processes": "limit-processes",
    "output-files": "limit-output-files", "output-bytes": "limit-output-bytes",
}

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "A Python program."},
        "inputs": {
            "type": "object",
            "description": "Name → art_… ref (or {\"$ref\": …}) of data to stage as a file.",
            "additionalProperties": True,
        },
    },
    "required": ["code"],
    "additionalProperties": False,
}


class PackageInventory:
    """Installed distributions, re-read at most every `interval` seconds; listeners hear changes."""

    def __init__(self, interval: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 read: Callable[[], list[str]] | None = None) -> None:
        self.interval = interval
        self.clock = clock
        self._read = read or _installed
        self._names: list[str] = self._read()
        self._at = clock()
        self.listeners: list[Callable[[list[str]], None]] = []

    def current(self) -> list[str]:
        """The installed distribution names, re-read when older than `interval`; listeners hear a
        change."""
        if self.clock() - self._at >= self.interval:
            self._at = self.clock()
            names = self._read()
            if names != self._names:
                self._names = names
                for listener in list(self.listeners):
                    listener(names)
        return self._names


def _installed() -> list[str]:
    names = {d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}
    return sorted(names, key=str.lower)


def describe(packages: list[str], limits: Limits, unenforced: list[str] | None = None) -> str:
    """The run_python tool's description: how inputs and outputs work, the limits (and which
    of them hold only per process here), and the importable packages."""
    shown = ", ".join(packages[:120]) + (" …" if len(packages) > 120 else "")
    return (
        "Run a Python program. Data you pass in `inputs` (name → ref) is staged as files: read "
        "the JSON manifest at os.environ['BYREF_INPUTS'] ({name: {path, mediaType, bytes}}). "
        "Write any file you want back (a chart, a CSV) into os.environ['BYREF_OUTPUT_DIR']; each "
        "comes back as a ref. stdout is returned (bounded). No network, and no files but its "
        f"own. {_limits_text(limits, unenforced or [])} "
        f"Installed packages: {shown}."
    )


def _limits_text(limits: Limits, unenforced: list[str]) -> str:
    per_process = any("memory is per process" in note for note in unenforced)
    processes = (f"{limits.max_processes} processes and threads" if per_process else
                 f"one process (no subprocesses; up to {limits.max_processes} threads)")
    text = (f"Limits for the whole run: {limits.cpu_seconds}s CPU, "
            f"{limits.memory_bytes >> 20} MB memory, {limits.disk_bytes >> 20} MB and "
            f"{limits.disk_files:,} files in all in /tmp, /dev/shm and the working directory "
            f"({limits.file_bytes >> 20} MB a file), {limits.max_open_files:,} open files, "
            f"{limits.wall_seconds:g}s wall clock, {processes}, "
            f"{limits.max_output_files} output files.")
    if not per_process:
        text += (" Everything the program can make the host hold is within these: no shared "
                 "memory but /dev/shm, no sockets, pipes of 64 KiB.")
    if unenforced:
        text += " On this host: " + "; ".join(unenforced) + "."
    return text


def make_run_python_tool(
    *, runner: CodeRunner | None = None, limits: Limits | None = None,
    inventory: PackageInventory | None = None,
) -> Tool:
    """The `run_python` tool: runs model-written code in a sandbox with staged ref inputs,
    returning stdout and output files as refs."""
    runner = runner or SubprocessRunner()
    limits = limits or Limits()
    inventory = inventory or PackageInventory()
    says = getattr(runner, "unenforced", None)
    unenforced: list[str] = says() if callable(says) else []
    warm_up = getattr(runner, "warm_up", None)
    if callable(warm_up):  # a runner that keeps sandboxes warm starts one for the first run
        warm_up(limits)

    def run_python(ctx: ToolContext, code: str, inputs: dict[str, Any] | None = None) -> Any:
        with prepare(runner, limits) as sandbox:
            stage = sandbox.stage
            staged = [_stage(name, value, ctx, stage) for name, value in (inputs or {}).items()]
            stage.manifest.write_bytes(encode({s.name: {
                "path": str(s.path), "mediaType": s.media_type, "bytes": s.bytes}
                for s in staged}))
            try:
                outcome = sandbox.run(code)
            except IsolationUnavailable as exc:
                # The developer's message (naming the opt-out) is logged by the runner.
                ctx.emit("refused", op="run", tool=RUN_PYTHON, reason="isolation-unavailable")
                raise ToolRefusal(
                    f"Tool {RUN_PYTHON!r} cannot run code on this host: code runs only in an "
                    f"isolated sandbox, and none can be made here ({exc.reason}). Answer "
                    "without running code.", "isolation-unavailable") from exc
            return report_run(outcome, staged, ctx, limits, unenforced)

    tool = Tool(name=RUN_PYTHON, description=describe(inventory.current(), limits, unenforced),
                fn=run_python, input_schema=_SCHEMA, lazy=frozenset({"inputs"}), wants_ctx=True,
                capabilities=("code.python.run",), glossary=("script", "compute", "chart"))

    def refresh(names: list[str]) -> None:
        tool.description = describe(names, limits, unenforced)  # descriptions as live data
        for watcher in list(tool.watchers):
            watcher(tool)

    inventory.listeners.append(refresh)
    tool.refresh = inventory.current
    return tool


def _stage(name: str, value: Any, ctx: ToolContext, stage: StagingArea) -> StagedInput:
    if not name.replace("_", "").replace("-", "").isalnum():
        raise ToolRefusal(f"Input name {name!r} must be letters, digits, '_' or '-'.",
                          "invalid-input")
    key = value if isinstance(value, str) and value.startswith("art_") else None
    ref = None
    if key is None and is_envelope(value):
        try:
            ref = parse_model_envelope(value)
        except RefRefusal as exc:
            raise ToolRefusal(f"Input {name!r} is a reference that cannot be used. {exc}",
                              "bad-ref") from exc
        if isinstance(ref, Blob) and ref.key is not None:
            key = ref.key
    if key is not None:
        meta = ctx.artifacts.head(key)
        streamed = ctx.store.get_stream(ctx.scope, key) if meta and isinstance(
            ctx.store, CanGetStream) else None
        if meta is None:
            raise ToolRefusal(
                f"Tool {RUN_PYTHON!r} was not executed: input {name!r} = {key!r} is not "
                "available (missing, expired, or not stored in this session).",
                "missing-or-expired")
        ext = mimetypes.guess_extension(meta.media_type.split(";")[0]) or ".bin"
        path = stage.inputs / f"{name}{ext}"
        with path.open("wb") as fh, _store_errors(name, key):
            if streamed is not None:
                for chunk in streamed.chunks:
                    fh.write(chunk)
            else:
                artifact = ctx.artifacts.get(key)
                if artifact is None:
                    raise ToolRefusal(f"Input {name!r} = {key!r} vanished while staging.",
                                      "missing-or-expired")
                fh.write(artifact.data)
        ctx.emit("resolved", ref=key, tool=RUN_PYTHON, staged_as=name, bytes=meta.bytes)
        return StagedInput(name, path, meta.media_type, meta.bytes, key, meta.kind)
    if isinstance(ref, MessageRef):
        try:
            data = encode(ctx.resolver.value(ref))
        except RefRefusal as exc:
            raise ToolRefusal(f"Input {name!r} could not be resolved. {exc}", "bad-ref") from exc
    else:
        data = encode(value)  # a literal value: staged as JSON
    path = stage.inputs / f"{name}.json"
    path.write_bytes(data)
    return StagedInput(name, path, "application/json", len(data))


def _limit_amount(stopped: str, limits: Limits, unenforced: list[str]) -> str:
    """The limit's own figure, and where it holds only per process, that it does."""
    amounts = {
        "cpu": f"{limits.cpu_seconds}s", "wall": f"{limits.wall_seconds:g}s",
        "memory": f"{limits.memory_bytes >> 20} MB for the run",
        "disk": f"{limits.disk_bytes >> 20} MB and {limits.disk_files:,} files in all in /tmp, "
                "/dev/shm and the working directory",
        "file-size": f"{limits.file_bytes >> 20} MB a file",
        "processes": "one process with at most "
                     f"{limits.max_processes} threads; subprocesses cannot be started",
    }
    if any("memory is per process" in note for note in unenforced):
        amounts["processes"] = f"{limits.max_processes} processes and threads"
    # Each note names the limit it is about ("memory", "disk"): only those are said here.
    notes = [note for note in unenforced if stopped in note]
    return amounts[stopped] + "".join(f"; on this host {note}" for note in notes)


@contextlib.contextmanager
def _store_errors(name: str, key: str) -> Iterator[None]:
    """A damaged or unreadable staged input is the store's refusal, never an exception's name;
    the cause stays chained for the operator."""
    try:
        yield
    except ArtifactIntegrityError as exc:
        raise ToolRefusal(
            f"Tool {RUN_PYTHON!r} was not executed: input {name!r} = {key!r} failed its "
            "integrity check and was not used; produce it again.", "integrity") from exc
    except ArtifactError as exc:
        raise ToolRefusal(
            f"Tool {RUN_PYTHON!r} was not executed: input {name!r} = {key!r} cannot be read "
            f"now ({str(exc)[:200]}).", "missing-or-expired") from exc


def report_run(outcome: RunOutcome, staged: list[StagedInput], ctx: ToolContext,
               limits: Limits, unenforced: list[str] | None = None, *,
               tool: str = RUN_PYTHON) -> dict[str, Any]:
    """A finished run as `{exitCode, stdout, files}` (files minted with the inputs' lineage),
    or the ToolRefusal for a limit it hit or code that failed (`tool` names the runner)."""
    stdout = outcome.stdout[-limits.max_stdout_chars:]
    if outcome.stopped in ("cpu", "memory", "wall", "disk", "file-size", "processes"):
        reason = _LIMIT_REASONS[outcome.stopped]
        ctx.emit("refused", op="run", tool=tool, reason=reason)
        raise ToolRefusal(
            f"Your program was stopped at {_LIMIT_WORDS[outcome.stopped]} "
            f"({_limit_amount(outcome.stopped, limits, unenforced or [])}) and produced no "
            f"result. Make it do less work (sample, aggregate, stream). Last output: "
            f"{(outcome.stderr or stdout)[-600:]!r}", reason)
    if outcome.exit_code != 0:  # what it printed before it failed is kept (often the clue)
        printed = (f" It printed (last 2,000 chars):\n{outcome.stdout[-2_000:]}\n"
                   if outcome.stdout else " ")
        raise ToolRefusal(
            f"Your program exited with code {outcome.exit_code}.{printed}stderr (last 2,000 "
            f"chars): {outcome.stderr[-2_000:]}", "code-error")
    if outcome.stopped in ("output-files", "output-bytes"):
        reason = _LIMIT_REASONS[outcome.stopped]
        ctx.emit("refused", op="run", tool=tool, reason=reason)
        raise ToolRefusal(
            f"Your program's output went over {_LIMIT_WORDS[outcome.stopped]} "
            f"({limits.max_output_files} files, {limits.max_output_bytes >> 20} MB); nothing "
            "was kept. Write fewer, smaller files.", reason)
    parents = tuple(dict.fromkeys(s.ref for s in staged if s.ref))
    files = [_mint(path, parents, ctx) for path in outcome.outputs or []]
    files += [{"name": name, "stored": False, "reason": why}
              for name, why in outcome.refused_outputs]
    result: dict[str, Any] = {"exitCode": 0, "stdout": stdout, "files": files}
    if outcome.notes:
        result["notes"] = outcome.notes
    return result


def _mint(path: Path, parents: tuple[str, ...], ctx: ToolContext) -> dict[str, Any]:
    name = path.name
    ext = path.suffix.lstrip(".").lower() or "bin"
    gone = [p for p in parents if ctx.artifacts.head(p) is None]
    if gone:
        return {"name": name, "stored": False,
                "reason": f"its input {gone[0]!r} expired during the run, so its lineage cannot "
                          "be proven; run again with a live input."}
    media = mimetypes.guess_type(name)[0] or "application/octet-stream"
    meta = ctx.artifacts.put(path.read_bytes(), kind=f"file/{ext}", media_type=media,
                             label=name, parent_refs=parents)
    entry: dict[str, Any] = {"name": name, "value": {"$ref": {"type": "Blob", "key": meta.ref}},
                             "kind": meta.kind, "bytes": meta.bytes}
    if parents:
        entry["parentRefs"] = list(parents)
    return entry
