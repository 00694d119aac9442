"""`byref bench dispatch` compares each call with the same tool call without byref (not with a bare
Python call), and `byref bench store` reports an in-memory store per operation, never in MB/s
(the shape of the reports, never their numbers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from byref.bench.library import store as bench
from byref.bench.library.dispatch import dispatch_bench
from byref.cli.bench.store import format_bench


def test_dispatch_is_compared_with_the_same_call_without_byref() -> None:
    report = dispatch_bench(repeat=1, number=3)
    assert set(report) == {"no_refs", "one_ref", "one_wants", "one_placement"}
    for row in report.values():
        assert set(row) == {"work", "dispatch_us", "dispatch_median_us", "direct_us",
                            "overhead_us", "ratio", "chars_shown", "direct_chars"}
        assert row["direct_us"] > 0 and row["dispatch_us"] > 0
    placed = report["one_placement"]
    assert placed["direct_chars"] > 40_000  # without byref the model gets the whole export
    assert placed["chars_shown"] < 2_000  # through dispatch, a placed substitute


def test_the_memory_store_reports_latency_against_the_file_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SIZES", {"1KB": 1 << 10, "64KB": 64 << 10})
    monkeypatch.setattr(bench, "ROUNDS", {"1KB": 3, "64KB": 2})
    base = bench.baseline(tmp_path)
    urls = {"memory": "memory://", "file": f"file://{tmp_path / 'files'}"}
    adapters = {name: {"throughput": bench.throughput(url, base)} for name, url in urls.items()}
    bench.memory_vs_file(adapters, urls)
    for row in adapters["memory"]["throughput"].values():
        assert row["by_reference"] is True
        assert not any(key.endswith(("mb_s", "vs_baseline")) for key in row), row
        assert row["put_us"] > 0 and row["get_us"] > 0
    for row in adapters["file"]["throughput"].values():
        assert {"put_us", "get_us", "put_mb_s", "get_mb_s", "put_vs_baseline"} <= set(row)
    versus = adapters["memory"]["latency_vs"]
    assert versus["adapter"] == "file" and set(versus["sizes"]) == {"1KB", "64KB"}
    assert "latency_vs" not in adapters["file"]
    report = {"baseline": base, "stream_bytes": 1 << 20, "adapters": {
        name: {**a, "streamed": {"skipped": "n/a"}} for name, a in adapters.items()}}
    lines = format_bench(report).splitlines()
    memory = [ln for ln in lines if ln.startswith("memory    1KB")]
    assert len(memory) == 1 and "MB/s" not in memory[0]
    assert "hands over a reference, no bytes move; µs ×" in memory[0]
    assert memory[0].endswith(" get of file's")


def test_the_async_paths_are_measured_against_the_sync_turn_in_the_same_run() -> None:
    from byref.bench.library.dispatch_async import BASELINE, async_dispatch_bench

    paths = async_dispatch_bench(number=5, repeat=1)
    assert next(iter(paths)) == BASELINE and paths[BASELINE]["vs_sync_us"] == 0.0
    assert {"adispatch, async tool", "Session.run_call, async tool",
            "Session.dispatch, 20 async calls"} <= set(paths)
    for row in paths.values():
        assert row["us"] > 0
        assert abs(row["vs_sync_us"] - (row["us"] - paths[BASELINE]["us"])) <= 0.2


def test_the_sqlite_store_reports_its_space_after_deletes_before_and_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SPACE_SIZES", (4 << 10, 256 << 10))
    space = bench.space_after_deletes(f"sqlite:///{tmp_path / 'b.db'}", n=60)
    assert space["puts"] == 60 and space["deleted"] == 54
    assert space["held"]["free_pages"] > space["given"]["free_pages"]
    assert space["held"]["file_mb"] > space["given"]["file_mb"]
    assert space["time_vs_held"] > 0
    assert not [p for p in tmp_path.iterdir() if "-space-" in p.name]  # its files removed
    assert bench.space_after_deletes(f"file://{tmp_path / 'files'}") == {
        "skipped": "not a SQLite store"}
    entry = {"throughput": {}, "streamed": {"skipped": "n/a"}, "space": space}
    lines = format_bench({"baseline": {}, "stream_bytes": 1 << 20,
                          "adapters": {"sqlite": entry}}).splitlines()
    assert lines[-1].startswith("sqlite    space after 60 puts, 54 deletes: free pages ")
    assert " → " in lines[-1] and lines[-1].endswith(f"(×{space['time_vs_held']})")
