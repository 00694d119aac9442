"""`byref bench conversations --quick` runs and reports every implementation against the
baseline measured in the same run (shape only: figures are the benchmark's, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _waits import scaled


def test_the_quick_bench_reports_each_implementation_against_the_baseline() -> None:
    done = subprocess.run([sys.executable, "-m", "byref.cli", "bench", "conversations",
                           "--quick", "--json"], capture_output=True, text=True,
                          timeout=scaled(120))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["baseline_us"] > 0
    assert set(report["implementations"]) >= {"memory", "sqlite"}
    for row in report["implementations"].values():
        assert row["ratio"] == pytest.approx(row["per_call_us"] / report["baseline_us"])
        assert row["resume_messages"] == 100
        assert row["rss_after_mib"] > 0
