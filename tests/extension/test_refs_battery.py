"""The `dev.byref/refs` battery against real servers over stdio: the gateway (both protocol
generations), an author's SDK server made to speak the extension by `refs_server`, and a broken
fixture that fails each case it breaks, each for its own reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from byref.extension.conformance import RefsReport, RefsTarget, run_refs_conformance

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "gateway" / "fixtures"
ENV = {"PYTHONPATH": str(ROOT / "src")}


def _run(target: RefsTarget) -> RefsReport:
    return anyio.run(run_refs_conformance, target)


def _gateway(tmp_path: Path, modern: bool) -> RefsTarget:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"probe": {
        "command": sys.executable, "args": [str(FIXTURES / "refs_probe.py")], "env": ENV}}}))
    return RefsTarget("gateway", command=[sys.executable, "-m", "byref.cli", "gateway",
                                          "--config", str(config)],
                      env=ENV, emit="probe__emit", digest="probe__digest", modern=modern)


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
def test_the_gateway_passes_the_battery(tmp_path: Path, modern: bool) -> None:
    report = _run(_gateway(tmp_path, modern))
    assert report.ok, report.to_json()
    outcomes = report.outcomes()
    # The gateway declares upstream tools on demand: listed only once its server is up.
    assert outcomes.pop("schema-accepts") in ("passed", "not-applicable")
    assert set(outcomes.values()) == {"passed"}, outcomes


@pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
def test_an_sdk_server_with_one_line_passes_the_battery(modern: bool) -> None:
    report = _run(RefsTarget("sdk", command=[sys.executable, str(FIXTURES / "refs_sdk_server.py")],
                             env=ENV, modern=modern))
    assert report.ok and report.counts() == {"passed": 10}, report.to_json()


def test_a_broken_server_fails_each_case_it_breaks_for_its_own_reason() -> None:
    report = _run(RefsTarget("broken", command=[sys.executable, str(FIXTURES / "refs_broken.py")],
                             env=ENV))
    failed = {r.name: r.detail for r in report.results if r.outcome == "failed"}
    assert not report.ok
    assert set(failed) == {"placed-announced", "absent-one-way", "absent-other-owner",
                           "near-envelope-refused", "fallback-core"}, report.to_json()
    assert "announced sha256" in failed["placed-announced"]
    assert "two unknown keys' refusals" in failed["absent-one-way"]
    assert "refused alike" in failed["absent-other-owner"]
    assert "was not refused" in failed["near-envelope-refused"]
    assert "did not declare" in failed["fallback-core"]
    assert {r.name for r in report.results if r.outcome == "passed"} == {
        "advertised", "small-inline", "resolves-exact", "derived-refused", "schema-accepts"}
