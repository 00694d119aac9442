"""The status-report round trip, run twice: through byref, and through a naive harness.

The naive run is the baseline: every result inlined, and the model hands rows to the PDF tool by
retyping them. Above `NAIVE_MAX_BYTES` it is not run (it would not fit in memory); its figures
are computed from sizes and reported with `"run": false`, never silently.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.demo.data import DEFAULT_SIZE, ExportInfo, open_rows, write_export
from byref.demo.tools import Delivered, make_tools
from byref.dispatch import Policy
from byref.events import Emitter, JsonLinesSink
from byref.harness import Harness, Ledger, ScriptedModel, call, last_result, say
from byref.harness.messages import Model, Request
from byref.harness.tokens import estimate_tokens
from byref.jsonview import encode
from byref.store import FileStore, Scope
from byref.tools import BUILTIN_JSON_TOOLS
from byref.transcript import Transcript

NAIVE_MAX_BYTES = 64_000_000
REPORT = "report.json"
"""The demo's report, written into the run directory beside its transcript and trace."""
QUESTION = "Filter the ATLAS work items to the open ones and make me a PDF status report."
TITLE = "ATLAS status report: open work items"
OPEN = [{"field": "status", "eq": "open"}]


def byref_script() -> ScriptedModel:
    """The scripted model of the byref path: export, query the open items by ref, make the PDF."""
    return ScriptedModel([
        call("export_work_items", {"project": "ATLAS"}),
        call("query_json", lambda r: {"source": last_result(r)["value"], "path": "/items",
                                      "filter": OPEN}),
        call("generate_pdf", lambda r: {"title": TITLE, "rows": last_result(r)["value"]}),
        say("Done: the PDF status report of the open ATLAS work items is ready."),
    ])


def naive_script() -> ScriptedModel:
    """The scripted model of the naive path: it reads the whole export and writes the open rows
    back out."""
    def retype(request: Request) -> dict[str, Any]:
        # The model read the whole export in its context and writes the open rows back out.
        export = last_result(request)
        return {"title": TITLE, "rows": [i for i in export["items"] if i["status"] == "open"]}

    return ScriptedModel([
        call("export_work_items", {"project": "ATLAS"}),
        call("generate_pdf", retype),
        say("Done: the PDF status report of the open ATLAS work items is ready."),
    ])


@dataclass
class DemoResult:
    """A demo run's report and the requests the model was sent."""
    report: dict[str, Any]
    requests: list[Request]


def run_byref(
    export: Path, out: Path, model: Model | None = None,
) -> tuple[dict[str, Any], list[Request], Delivered]:
    """The byref run; `model` defaults to the scripted one (a real provider's adapter also fits)."""
    delivered = Delivered()
    tools = [*make_tools(export, out / "status-report.pdf", delivered), *BUILTIN_JSON_TOOLS]
    transcript_path = out / "transcript.jsonl"
    transcript_path.unlink(missing_ok=True)
    trace = out / "trace.jsonl"
    trace.unlink(missing_ok=True)
    emit = Emitter(JsonLinesSink(trace))
    with Transcript(transcript_path) as transcript:  # the file is closed once the run is read
        harness = Harness(model if model is not None else byref_script(), tools,
                          transcript=transcript, store=FileStore(out / "store", emit=emit),
                          emit=emit, scope=Scope("demo", conversation=uuid.uuid4().hex))
        run = harness.run_sync(QUESTION)
        ledger = Ledger.of(run)
    figures: dict[str, Any] = {
        "model_read_chars": ledger.model_read_chars,
        "model_written_chars": ledger.model_written_chars,
        "peak_request_chars": ledger.peak_request_chars,
        "model_read_tokens": ledger.model_read_tokens,
        "model_written_tokens": ledger.model_written_tokens,
        "peak_request_tokens": ledger.peak_request_tokens,
        "requests": ledger.requests,
        "rows_delivered": len(delivered.rows),
    }
    usage = provider_usage(model)
    if usage is not None:
        figures["provider_usage"] = usage
    return figures, run.requests, delivered


def provider_usage(model: Model | None) -> dict[str, int] | None:
    """What a real provider billed over the run (adapters keep one `Usage` per turn)."""
    turns = getattr(model, "turns", None)
    if not turns:
        return None
    return {
        "turns": len(turns),
        "input_tokens": sum(t.input_tokens for t in turns),
        "output_tokens": sum(t.output_tokens for t in turns),
        "cache_read_tokens": sum(t.cache_read_tokens or 0 for t in turns),
        "cache_write_tokens": sum(t.cache_write_tokens or 0 for t in turns),
    }


def model_label(model: Model | None) -> str:
    """`provider:model` for a real model, `scripted` otherwise."""
    provider, name = getattr(model, "provider", None), getattr(model, "model", None)
    return f"{provider}:{name}" if provider and name else "scripted"


def run_naive(export: Path, out: Path) -> tuple[dict[str, Any], Delivered]:
    """Run the naive path on `export`, writing its PDF under `out`; returns its ledger and what
    was delivered."""
    delivered = Delivered()
    tools = [*make_tools(export, out / "naive-report.pdf", delivered), *BUILTIN_JSON_TOOLS]
    harness = Harness(naive_script(), tools, policy=Policy.naive(),
                      scope=Scope("demo-naive", conversation=uuid.uuid4().hex))
    run = harness.run_sync(QUESTION)
    ledger = Ledger.of(run)
    return {
        "model_read_chars": ledger.model_read_chars,
        "model_written_chars": ledger.model_written_chars,
        "peak_request_chars": ledger.peak_request_chars,
        "model_read_tokens": ledger.model_read_tokens,
        "model_written_tokens": ledger.model_written_tokens,
        "rows_delivered": len(delivered.rows),
        "run": True,
    }, delivered


def naive_from_sizes(info: ExportInfo, rows: list[dict[str, Any]], pdf: Path) -> dict[str, Any]:
    """What the naive run would cost, computed without running it (it would not fit)."""
    rows_text = encode(rows).decode()
    call_overhead = len(encode({"project": "ATLAS"}).decode()) + len(TITLE) + 40
    pdf_inline = len(base64.b64encode(pdf.read_bytes())) + 40
    read = len(QUESTION) + info.bytes + pdf_inline
    return {
        "model_read_chars": read,
        "model_written_chars": len(rows_text) + call_overhead,
        "peak_request_chars": read + len(rows_text),
        "model_read_tokens": estimate_tokens(rows_text) * info.bytes // max(1, len(rows_text)),
        "model_written_tokens": estimate_tokens(rows_text),
        "rows_delivered": len(rows),
        "run": False,
    }


def run_demo(
    out: Path, size: int = DEFAULT_SIZE, *, naive: bool | None = None,
    progress: Callable[[str, int], Callable[[float], None]] | None = None,
    model: Model | None = None,
) -> DemoResult:
    """Write an export of `size` bytes under `out` and run the scenario through byref (and the
    naive path when asked); returns the report."""
    out.mkdir(parents=True, exist_ok=True)
    export = out / "export.json"

    def stage(label: str) -> Callable[[float], None]:
        """A stage with no measurable parts: reported as it starts, one unit when done."""
        return progress(label, 1) if progress else lambda _: None

    advance = progress("generating the export", size) if progress else None
    info = write_export(export, size, progress=advance)
    done = stage("reading the open rows the report must hold")
    expected = open_rows(export)
    done(1)
    done = stage("running the agent through byref")
    figures, requests, delivered = run_byref(export, out, model)
    done(1)
    pdf = out / "status-report.pdf"
    figures["rows_identical"] = encode(delivered.rows) == encode(expected)
    run_naive_now = naive if naive is not None else info.bytes <= NAIVE_MAX_BYTES
    if run_naive_now:
        done = stage("running the naive harness")
        naive_figures, naive_delivered = run_naive(export, out)
        naive_figures["rows_identical"] = encode(naive_delivered.rows) == encode(expected)
    else:
        done = stage("computing the naive side from sizes")
        naive_figures = naive_from_sizes(info, expected, pdf)
    done(1)
    report = {
        "model": model_label(model),
        "byref": figures,
        "naive": naive_figures,
        "rows_expected": len(expected),
        "export_bytes": info.bytes,
        "export_items": info.items,
        "ratio_read": round(naive_figures["model_read_chars"] / figures["model_read_chars"], 1),
        "ratio_written": round(
            naive_figures["model_written_chars"] / max(1, figures["model_written_chars"]), 1
        ),
        "pdf": str(pdf),
        "transcript": str(out / "transcript.jsonl"),
        "trace": str(out / "trace.jsonl"),
        "store": str(out / "store"),
    }
    # The run directory keeps its own figures, so `byref lens DIR` shows what this command
    # printed (the naive side is measured, or computed from sizes when it would not fit).
    (out / REPORT).write_bytes(encode(report) + b"\n")
    return DemoResult(report, requests)
