"""The event trace on disk, read back by `byref trace`; and the dispatch benchmark's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from byref.bench.library.dispatch import dispatch_bench
from byref.cli import main
from byref.events import Emitter, JsonLinesSink
from byref.harness import Harness, ScriptedModel, call, say
from byref.store import MemoryStore
from byref.tools import Payload, tool


@tool
def export() -> Payload:
    """Export."""
    return Payload.from_bytes(b'{"secret": "row-data-123"}', "application/json", kind="export")


def test_trace_records_metadata_only_and_reads_back(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.jsonl"
    emit = Emitter(JsonLinesSink(trace))
    h = Harness(ScriptedModel([call("export", {}), call("nope", {}), say("x")]), [export],
                store=MemoryStore(emit=emit), emit=emit)
    h.run_sync("go")
    raw = trace.read_text()
    assert "row-data-123" not in raw
    assert main(["trace", str(trace), "--json"]) == 0
    events = json.loads(capsys.readouterr().out)
    assert [e["event"] for e in events] == ["minted", "refused"]
    assert events[1]["reason"] == "unknown-tool" and events[1]["op"] == "dispatch"
    assert main(["trace", str(trace), "--event", "minted"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 1 and "minted" in table[0] and "kind=export" in table[0]


def test_trace_of_a_bad_file_is_a_clear_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text('{"event": "minted", "at": 1}\nnot json\n')
    assert main(["trace", str(bad)]) == 2
    assert f"byref trace: {str(bad)!r} line 2 is not JSON" in capsys.readouterr().err


def test_dispatch_bench_reports_every_shape() -> None:
    report = dispatch_bench(repeat=1, number=5)
    assert set(report) == {"no_refs", "one_ref", "one_wants", "one_placement"}
    for row in report.values():
        assert row["dispatch_us"] > row["direct_us"] > 0
        assert row["ratio"] > 1
