"""Shared rigs for the reads tests: a tool that keeps a result version, and a scripted read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from byref.harness import Harness, Limits, ScriptedModel, call, last_result, say
from byref.reads import ReadLimits, ResultVersions
from byref.refs import Blob
from byref.tools import Tool, ToolContext, tool
from byref.tools.readers.read_result import make_read_result


def keeping_tool(value: Any, *, id_field: str | None = None,
                 expected_ids: Sequence[str] | None = None, label: str = "records") -> Tool:
    """`fetch_records()`: keeps `value` as a result version and returns its Blob ref."""

    @tool(name="fetch_records")
    def fetch_records(ctx: ToolContext) -> dict[str, Any]:
        """Fetch the records."""
        assert ctx.store is not None
        version = ResultVersions(ctx.store, ctx.scope).keep(
            "fetch_records", {}, value, id_field=id_field, expected_ids=expected_ids,
            label=label)
        return {"result": Blob(key=version.ref), "rows": version.row_count}

    return fetch_records


def lines_tool(data: bytes) -> Tool:
    """`fetch_records()`: stores raw JSON Lines (as an export would) and returns the Blob ref."""

    @tool(name="fetch_records")
    def fetch_records(ctx: ToolContext) -> dict[str, Any]:
        """Fetch the export."""
        meta = ctx.artifacts.put(data, kind="export/lines", media_type="application/x-ndjson",
                                 label="export")
        return {"result": Blob(key=meta.ref)}

    return fetch_records


def scripted_reads(source: Tool, reads: Sequence[dict[str, Any]], *,
                   limits: ReadLimits | None = None) -> tuple[list[dict[str, Any]], Harness]:
    """Fetch once, then `read_result` with each of `reads` (ref filled in); the answers."""
    steps: list[Any] = [call("fetch_records", {})]
    ref: dict[str, Any] = {}

    def remember(request: Any) -> dict[str, Any]:
        ref["value"] = last_result(request)["result"]
        return {"ref": ref["value"], **reads[0]}

    steps.append(call("read_result", remember))
    for args in reads[1:]:
        steps.append(call("read_result", lambda _r, a=args: {"ref": ref["value"], **a}))
    steps.append(say("done"))
    h = Harness(ScriptedModel(steps), [source, make_read_result(limits)],
                limits=Limits(read_limits=limits))
    run = h.run_sync("Read the records.")
    answers = [last_result(request) for request in run.requests[2:]]
    return answers, h
