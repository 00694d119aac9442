"""`byref bench refline` runs end to end: both sessions answered, every figure measured on the
answers of this run (the report's shape and what its figures must agree on, never how fast)."""

from __future__ import annotations

import json
import subprocess
import sys

from _waits import scaled
from byref.bench.gateway.refline import format_report
from byref.dispatch.outbound.reflines import long_ref_line, ref_line


def test_the_refline_bench_reports_both_lines_against_fastmcp() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "byref.cli", "bench", "refline", "--calls", "3", "--json"],
        capture_output=True, text=True, timeout=scaled(240), stdin=subprocess.DEVNULL,
        check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["calls"], report["echo_bytes"]) == (3, 199)
    shown = report["shown"]
    assert shown["fastmcp"]["bytes"] == 199  # FastMCP shows the text alone
    # byref shows the text, a newline and its line: the handle's, or the long one it replaced.
    handle_bytes = report["ref_line"]["handle"]["bytes_max"]
    assert handle_bytes <= len("\n" + ref_line(10**9 - 1, 0))  # nine digits at most
    assert shown["byref"]["bytes"] <= 199 + handle_bytes
    assert shown["byref_long_line"]["bytes"] == 199 + len("\n" + long_ref_line(10**10, 0))
    assert report["ref_line"]["handle"]["o200k_base_max"] <= 8
    assert report["ref_line"]["handle"]["cl100k_base_max"] <= 8
    assert report["ratio_bytes"] == round(shown["byref"]["bytes"] / 199, 3)
    assert "FastMCP (baseline)" in format_report(report)
