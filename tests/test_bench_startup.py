"""`byref bench startup` runs end to end on one spawn per side and prints a row per side with its
ratios to both baselines (the figures are the bench's to print, not a test's to time)."""

from __future__ import annotations

import json
import subprocess
import sys

from _waits import scaled
from byref.bench.gateway.startup import BASELINES, SIDES, format_report


def test_the_startup_bench_prints_every_side_against_the_baselines() -> None:
    done = subprocess.run([sys.executable, "-m", "byref.cli", "bench", "startup", "--spawns",
                           "1", "--json"], capture_output=True, text=True, timeout=scaled(600))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["spawns"] == 1 and list(report["sides"]) == list(SIDES)
    for side in report["sides"].values():
        assert 0 < side["init_wall"] <= side["list_wall"]
        assert side["init_cpu"] is None or side["init_cpu"] <= side["list_cpu"]
    for base in BASELINES:  # a baseline against itself
        assert report["sides"][base][f"init_wall_vs_{base.split()[0]}"] == 1.0
    table = format_report(report).splitlines()
    assert table[0].startswith("start-up over stdio: medians of 1 spawns per side")
    assert "load average" in table[0]
    for side in SIDES:
        assert sum(line.startswith(side + " ") for line in table) == 1, (side, table)
