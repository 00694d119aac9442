"""`byref bench code-start` runs its three servers end to end on a few rounds and reports what it
measured, each figure beside FastMCP's from the same run (the figures themselves are the bench's
to print, never a test's to time)."""

from __future__ import annotations

import pydantic_monty  # noqa: F401  (FastMCP's CodeMode, the baseline: byref[bench])
import pytest

from byref.bench.gateway.code_start import bench_code_start, format_report
from byref.tools.run_python.sandbox import Sandbox


def test_the_code_start_bench_reports_cold_warm_and_fastmcp() -> None:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    report = bench_code_start(rounds=4, calls=(0, 1, 3))
    assert set(report["empty"]) == {"cold", "warm", "fastmcp", "fastmcp_local"}
    for way in report["empty"].values():
        assert way["runs"] == 4 and 0 < way["p50_ms"] <= way["p90_ms"]
    assert set(report["by_calls"]["warm"]) == {0, 1, 3}
    pool = report["pool"]
    # Every warm run took a warm sandbox of its own: the first (untimed), 4 empty programs, and
    # 3 rounds of 1 and 3 calls.
    assert pool["taken"] == 1 + 4 + 3 * 2 and pool["started"] >= pool["taken"]
    assert pool["peak_live"] <= 2
    said = format_report(report)
    assert "FastMCP CodeMode" in said and "break-even, warm byref vs FastMCP" in said
    assert set(report["break_even"]) == {"fastmcp", "fastmcp_local"}
