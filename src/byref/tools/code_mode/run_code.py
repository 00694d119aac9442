"""Code mode: `run_code`, a Python program in run_python's sandbox that calls tools over refs.

The program calls `tools.<name>(**args)` (sync; `tools.gather([(name, args), …])` runs several at
once), `tools.search("…")` and `help(tools.<name>)`; its inputs are `tools.inputs`. Each call
crosses one channel (`code_mode.channel`) to the host, which dispatches it through the very
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
wall clock covers its calls. A call past its time, or still running when the run ends, is
cancelled for real where it can be (an async tool's task; an upstream is told, as when a client
cancels) and recorded so; a sync tool on a thread cannot be stopped, so it is bounded instead
(see `code_host`). A tool the policy keeps from code (`call_tool` 'off', or 'readOnly'
and not read-only), and code itself (no run starts another), is refused with the same words the
model would read; a refusal reaches the code as a catchable `tools.ToolError` and the summary,
with the reason dispatch gave it (`Part.reason`).
Where no sandbox can be made, `run_code` refuses as `run_python` does.

This module is the tool itself; the host's side of the channel and its rules are `code_host`,
the handles `code_handles`, the channel `channel`, the sandboxed side `code_child`.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import threading
from pathlib import Path
from typing import Any

from byref.tools.blocks import Blocks
from byref.tools.call_context import ToolContext
from byref.tools.code_mode import code_child
from byref.tools.code_mode.code_host import (
    RUN_CODE,
    CodeHost,
    CodeMode,
    hinted_read_only,
    signature,
)
from byref.tools.run_python.code import report_run
from byref.tools.run_python.runner import CodeRunner, Limits, SubprocessRunner, prepare
from byref.tools.run_python.sandbox import IsolationUnavailable
from byref.tools.tool import Tool, ToolRefusal

__all__ = ["RUN_CODE", "CodeMode", "describe_tool", "hinted_read_only", "make_run_code_tool",
           "signature"]

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
        f"{limits.wall_seconds:g}s wall clock for the whole run, {limits.cpu_seconds}s CPU; "
        f"{limits.memory_bytes >> 20} MB memory, {limits.disk_bytes >> 20} MB disk in all "
        "(/tmp, /dev/shm and the working directory) and "
        f"{limits.max_open_files:,} open files: everything the program can make the host "
        "hold. No network."
    )


def make_run_code_tool(*, runner: CodeRunner | None = None,
                       mode: CodeMode | None = None) -> Tool:
    """The `run_code` tool: runs model-written code in the sandbox with `tools` bound to the
    caller's own dispatch (see the module docstring)."""
    mode = mode or CodeMode()
    runner = runner or mode.runner or SubprocessRunner()
    limits = mode.limits
    warm_up = getattr(runner, "warm_up", None)
    if callable(warm_up):  # a runner that keeps sandboxes warm starts one for the first run
        warm_up(limits, bootstrap=_child_source(), channel=True)

    def run_code(ctx: ToolContext, code: str, inputs: dict[str, Any] | None = None) -> Any:
        if ctx.calls is None:  # a Tool copied without calls_tools, or called outside dispatch
            raise ToolRefusal(f"Tool {RUN_CODE!r} can run only through byref's dispatch.",
                              "tool-refused")
        host = CodeHost(ctx, ctx.calls, mode)
        parents = host.take_inputs(inputs or {})
        with prepare(runner, limits, bootstrap=_child_source(), channel=True) as sandbox:
            host_end = sandbox.channel
            if host_end is None:  # asked for above: a runner's defect
                raise ToolRefusal(f"Tool {RUN_CODE!r} could not open its tool channel.",
                                  "internal-error")
            sandbox.stage.manifest.write_bytes(b"{}")
            server = threading.Thread(target=host.serve, args=(host_end,),
                                      name=f"byref-code-{ctx.call_id}", daemon=True)
            server.start()
            try:
                outcome = sandbox.run(code)
            except IsolationUnavailable as exc:
                ctx.emit("refused", op="run", tool=RUN_CODE, reason="isolation-unavailable")
                raise ToolRefusal(
                    f"Tool {RUN_CODE!r} cannot run code on this host: code runs only in an "
                    f"isolated sandbox, and none can be made here ({exc.reason}). Answer "
                    "without running code.", "isolation-unavailable") from exc
            finally:
                with contextlib.suppress(OSError):
                    host_end.shutdown(socket.SHUT_RDWR)
                host.end()  # the serving thread waiting for a place stops waiting
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


@functools.cache
def _child_source() -> str:
    """The sandboxed side's source, read on the first run (not when byref.tools is imported)."""
    return Path(code_child.__file__).read_text()
