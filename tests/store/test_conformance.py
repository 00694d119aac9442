"""The public battery, one test per (adapter, law), against real services where they exist."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from byref.store.conformance.runner import CASES, Case, battery_for_url, format_report, run_case

ADAPTERS = ["memory", "file", "sqlite", "postgres", "s3"]
MEMORY_DECLARED = {"concurrent-puts-two-processes", "crash-mid-put-invisible"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_law_holds(adapter: str, case: Case, make_url: Callable[[str], str]) -> None:
    url = make_url(adapter)
    result = run_case(case, battery_for_url(url))
    if adapter == "memory" and case.name in MEMORY_DECLARED:
        assert result.outcome == "declared", result
        assert "memory" in result.detail
    else:
        assert result.outcome == "passed", f"{case.name}: {case.law}\n{result.detail}"


def test_whole_report_is_ok_and_printable(tmp_path: Path) -> None:
    from byref.store.conformance.runner import run_conformance

    report = run_conformance(battery_for_url(f"file://{tmp_path}"))
    assert report.ok
    text = format_report(report)
    assert text.startswith(f"Artifact store conformance: file://{tmp_path}")
    assert text.endswith(f"PASS: {len(CASES)} passed")
