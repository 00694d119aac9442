"""`byref bench gateway-code` runs end to end on a few calls and reports what it measured: the
characters each side gave the client, and the 10 MiB pass not growing the child as reading it
whole does (figures themselves are the bench's to print, not a test's to time)."""

from __future__ import annotations

import pytest

from byref.bench.gateway.code import PASS_BYTES, bench_gateway_code, format_report
from byref.tools.run_python.sandbox import Sandbox


def test_the_gateway_code_bench_reports_both_sides_and_the_pass() -> None:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    # Enough calls that their short answers outweigh one run's (a ref line is 17 characters).
    report = bench_gateway_code(calls=20, rounds=1)
    assert report["calls"] == 20 and report["read_bytes"] == PASS_BYTES
    assert report["one_by_one_chars"] > report["from_code_chars"] > 0
    kib = report["child_kib"]
    assert kib["after_pass"] - kib["baseline"] < 2 * 1024
    assert kib["after_reading_whole"] - kib["baseline"] >= PASS_BYTES >> 10
    assert "10 MiB passed between two inner calls by handle" in format_report(report)
