"""The lens shows a code run with its inner calls, read from the run's record: each inner call's
input, result and refs, and a handle passed from one inner call to the next traced between them.
A real harness run in the sandbox (skipped, saying why, where none can be made)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.lens import Lens, ReadOnlyStore, Run
from byref.lens.reading.calls import calls
from byref.store import MemoryStore, Scope
from byref.tools import Payload, tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox

SCOPE = Scope("acme", "alice", "code")
CODE = """
rows = tools.export()
print(tools.count_rows(data=rows)["rows"])
try:
    tools.nope()
except AttributeError:
    pass
tools.count_rows(data=7)
"""


def _tools() -> list[Any]:
    @tool
    def export() -> Payload:
        """Export every row as CSV."""
        data = b"".join(b"row-%06d,<b>x</b>\n" % i for i in range(20_000))
        return Payload.from_bytes(data, media_type="text/csv", kind="dataset/csv")

    @tool
    def count_rows(data: str) -> dict[str, int]:
        """Count the lines of a CSV."""
        return {"rows": data.count("\n")}

    return [export, count_rows]


def _run() -> tuple[Run, MemoryStore]:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    store = MemoryStore()
    harness = Harness(ScriptedModel([call("run_code", {"code": CODE}), say("done")]), _tools(),
                      store=store, scope=SCOPE, code_mode=CodeMode(runner=SubprocessRunner()))
    harness.run_sync("count the export")
    return Run(harness.transcript, [], ReadOnlyStore(store, [SCOPE]), "code run"), store


def test_a_code_run_shows_its_inner_calls_and_the_handle_between_them() -> None:
    run, _store = _run()
    [outer] = calls(run)
    assert outer.tool == "run_code" and outer.record is not None and outer.gap is None
    assert [(c.call_id, c.tool) for c in outer.inner] == [
        (f"{outer.call_id}.1", "export"), (f"{outer.call_id}.2", "count_rows"),
        (f"{outer.call_id}.3", "count_rows")]
    export, counted, refused = outer.inner
    assert export.result is not None and not export.result.is_error
    [returned] = [u for u in export.result.returns if u.key is not None]
    assert returned.went_to == [counted.call_id]  # the handle, passed by the code
    [taken] = counted.takes
    assert taken.key == returned.key and taken.origin_call == export.call_id
    assert refused.result is not None and refused.result.is_error

    page = Lens(run).respond("GET", "/").body.decode()
    assert f'id="inner-{outer.call_id}"' in page
    assert "inner calls from code (3)" in page
    assert f"/artifact/{outer.record}" in page
    assert "<b>x</b>" not in page  # the export's text is escaped where it shows at all


def test_a_record_the_store_no_longer_holds_is_said_not_guessed() -> None:
    run, store = _run()
    [outer] = calls(run)
    assert outer.record is not None
    store.delete(SCOPE, outer.record)
    [again] = calls(run)
    assert again.inner == [] and again.gap == (
        f"its record {outer.record} is not in this run's store")
    assert "inner calls not shown: its record" in Lens(run).respond("GET", "/").body.decode()


def test_the_totals_count_what_code_moved_by_handle() -> None:
    """Issue 39.A: a code run that moved its export by handle read "kept out of context 0
    chars, 0 refs, names no artifact"; the data its inner calls returned as handles is kept out,
    a handle the program passed is passed by ref, and each artifact is named (a stored
    conversation has no trace to name them)."""
    run, _store = _run()
    [outer] = calls(run)
    export = outer.inner[0]
    assert export.result is not None
    [returned] = [u for u in export.result.returns if u.key is not None]
    page = Lens(run).respond("GET", "/").body.decode()
    shown = {name: int(value) for name, value in
             re.findall(r'data-figure="([^"]+)" data-value="(\d+)"', page)}
    assert shown["kept_chars"] >= 20_000 * len("row-000000,<b>x</b>\n")
    assert shown["kept_chars"] == shown["inlined_read_chars"] - shown["model_read_chars"]
    assert shown["passed_refs"] == 1 and shown["passed_chars"] >= 400_000
    artifacts = page.split('id="artifacts"')[1].split("</table>")[0]
    assert returned.key in artifacts and outer.record in artifacts
