"""Code mode at the gateway (`byref.codeMode`): `run_code` offered to MCP clients.

Owns the run_code tool a toolbox puts in its catalog (`code_tool`) and its gate: which catalog
tools code may call. The program's inner calls run through the scope's own session, so a grant's
catalog, refs, placement, events and the run's record (lineage) are the model's own.

The law: code calls only what the model could call without anyone asked. 'off' (the default)
offers no run_code; 'readOnly' lets code call tools annotated readOnlyHint and byref's readers;
'all' every catalog tool — except that under `callTool: readOnly` code is refused, with the words
call_tool gives the model, any tool call_tool would refuse. The scaffolding is the model's, not
code's (code has `tools.search` and `help`). run_code sits behind search like a catalog tool
(declared from the start in direct mode). One runner serves the gateway (`code_runner`), so its
warm sandboxes are counted once, against `codeRuns.maxRuns`: a warm sandbox holds no one's data
and is given to one run, of whichever principal asks next.
"""

from __future__ import annotations

from collections.abc import Callable

from byref.discovery.declaring.workingset import ACTIVATE, SEARCH
from byref.gateway.catalog.metadata import is_read_only
from byref.gateway.catalog.toolbox import CALL_TOOL, read_only_refusal
from byref.gateway.config.file import GatewayConfig
from byref.tools import Tool
from byref.tools.code_mode.run_code import CodeMode, make_run_code_tool
from byref.tools.readers.present import PRESENT_TOOL_NAME
from byref.tools.run_python.runner import CodeRunner, SubprocessRunner

_MODEL_ONLY = frozenset({SEARCH, ACTIVATE, CALL_TOOL, PRESENT_TOOL_NAME})
"""Scaffolding code does not call: it finds tools with tools.search and calls them by name."""


def code_runner(config: GatewayConfig) -> SubprocessRunner | None:
    """The gateway's one sandbox runner for run_code (None when 'off'): `codeRuns.warm`
    sandboxes kept started ahead, never more than `codeRuns.maxRuns` alive, warm or running."""
    if config.code_mode == "off":
        return None
    # Kept however long the gateway idles: the next run, whenever it comes, starts warm.
    return SubprocessRunner(warm=config.runs_warm, cap=config.runs_max, idle=None)


def code_tool(config: GatewayConfig, runner: CodeRunner | None = None) -> Tool | None:
    """The run_code tool `config` offers, or None ('off'); its programs run through `runner`
    (the gateway's `code_runner`; default: one of the tool's own)."""
    if config.code_mode == "off":
        return None
    return make_run_code_tool(mode=CodeMode(read_only=is_read_only, refuse=_gate(config),
                                            runner=runner))


def _gate(config: GatewayConfig) -> Callable[[Tool], str | None]:
    def refuse(tool: Tool) -> str | None:
        name = tool.name
        if name in _MODEL_ONLY:
            return (f"Tool {name!r} was not called: it is the model's, not code's; call catalog "
                    "tools by name (tools.<name>) and find them with tools.search('...').")
        if is_read_only(tool):
            return None
        if config.call_tool == "readOnly":
            return read_only_refusal(name)  # as call_tool refuses the model
        if config.code_mode == "readOnly":
            return (f"Tool {name!r} was not called: code calls only read-only tools here "
                    f"(byref.codeMode is 'readOnly'); {name!r} may change things: load it with "
                    "activate_tool and call it by its own name, so your client can ask the user "
                    "first.")
        return None
    return refuse
