"""`byref bench run-python` runs and reports each way against the bare interpreter start measured
in the same run (shape only: figures are the benchmark's, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _waits import scaled
from byref.tools.run_python.sandbox import Sandbox


def test_the_bench_reports_each_way_against_the_bare_start() -> None:
    done = subprocess.run([sys.executable, "-m", "byref.cli", "bench", "run-python",
                           "--rounds", "2", "--json"], capture_output=True, text=True,
                          timeout=scaled(300))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    ways = report["ways"]
    sandboxed = Sandbox().unavailable() is None
    assert set(ways) == {"bare interpreter", "unisolated"} | (
        {"sandboxed", "sandboxed, warm"} if sandboxed else set())
    assert ways["bare interpreter"]["ratio"] == 1.0
    for row in ways.values():
        assert row["median_ms"] > 0
        assert row["ratio"] == pytest.approx(
            row["median_ms"] / ways["bare interpreter"]["median_ms"], rel=0.02)
    if not sandboxed:
        assert report["sandboxed"].startswith("no sandbox here: ")
