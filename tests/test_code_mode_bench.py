"""`byref bench code-mode`: the scenario's two paths write the same report, the code run in far
fewer turns and characters; the overhead figures are measured, not asserted against a clock."""

from __future__ import annotations

import pytest

from byref.bench.code.code_mode import (
    ITEMS,
    format_report,
    inner_call_overhead,
    run_code_mode,
    run_sequential,
)
from byref.tools.run_python.sandbox import Sandbox


def test_one_code_run_writes_the_same_report_in_two_turns() -> None:
    if (reason := Sandbox().unavailable()) is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    sequential, code = run_sequential(), run_code_mode()
    assert sequential.report == code.report  # byte-identical rows
    assert sequential.report.count(b"\n") > 2  # the filter kept some rows and dropped others
    assert sequential.report.count(b"\n") < ITEMS + 1
    assert sequential.turns == ITEMS + 3  # export, 40 lookups, the report, the answer
    assert code.turns == 2
    assert code.chars * 20 < sequential.chars


def test_the_overhead_figures_are_reported() -> None:
    if (reason := Sandbox().unavailable()) is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    figures = inner_call_overhead(calls=20, rounds=1)
    assert figures["calls"] == 20 and figures["direct_us"] > 0 and figures["inner_us"] >= 0
    text = format_report({"items": ITEMS, "report_bytes": 10, "report_identical": True,
                          "sequential": {"turns": 43, "chars": 1000, "last_request": 10},
                          "code": {"turns": 2, "chars": 100, "last_request": 5},
                          "overhead": figures})
    assert "21.5x fewer turns, 10.0x fewer characters" in text
