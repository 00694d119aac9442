"""The `dev.byref/refs` battery against real servers, over stdio and over HTTP, in both protocol
generations: the gateway, an author's SDK server made to speak the extension by `refs_server`,
and a broken fixture that fails each case it breaks, each for its own reason."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from _refs_rig import ALICE, BOB, ENV, FIXTURES, gateway_argv, gateway_config, listening

from byref.battery import Report
from byref.extension.conformance import RefsTarget, run_refs_conformance

GENERATIONS = pytest.mark.parametrize("modern", [False, True], ids=["handshake", "2026-07-28"])
PROBES = {"emit": "probe__emit", "digest": "probe__digest"}


def _run(target: RefsTarget) -> Report:
    return anyio.run(run_refs_conformance, target)


def _over_http(argv: list[str], name: str, modern: bool, **probes: str) -> Report:
    async def run() -> Report:
        async with listening(argv) as url:
            return await run_refs_conformance(RefsTarget(
                name, url=url, token=ALICE, other_token=BOB, modern=modern, **probes))
    return anyio.run(run)


def _all_passed(report: Report, *, but: dict[str, set[str]]) -> None:
    assert report.ok, report.to_json()
    outcomes = report.outcomes()
    for name, allowed in but.items():
        assert outcomes.pop(name) in allowed, report.to_json()
    assert set(outcomes.values()) == {"passed"}, report.to_json()


# The gateway declares upstream tools on demand: listed only once its server is up.
LISTED = {"schema-accepts": {"passed", "not-applicable"}}


@GENERATIONS
def test_the_gateway_passes_the_battery_over_stdio(tmp_path: Path, modern: bool) -> None:
    report = _run(RefsTarget("gateway", command=gateway_argv(gateway_config(tmp_path)),
                             env=ENV, modern=modern, **PROBES))
    _all_passed(report, but={**LISTED, "host-download": {"not-applicable"}})
    assert "over stdio" in {r.name: r.detail for r in report.results}["host-download"]


@GENERATIONS
def test_the_gateway_passes_the_battery_over_http(tmp_path: Path, modern: bool) -> None:
    argv = gateway_argv(gateway_config(tmp_path, tokens=True), "--transport", "http",
                        "--port", "0")
    _all_passed(_over_http(argv, "gateway-http", modern, **PROBES), but=LISTED)


@GENERATIONS
def test_an_sdk_server_with_one_line_passes_the_battery_over_stdio(modern: bool) -> None:
    report = _run(RefsTarget("sdk", command=[sys.executable, str(FIXTURES / "refs_sdk_server.py")],
                             env=ENV, modern=modern))
    assert report.ok and report.counts() == {"passed": 15, "not-applicable": 1}, report.to_json()


@GENERATIONS
def test_an_sdk_server_with_one_line_passes_the_battery_over_http(modern: bool) -> None:
    argv = [sys.executable, str(FIXTURES / "refs_sdk_server.py"), "--http"]
    report = _over_http(argv, "sdk-http", modern)
    assert report.ok and report.counts() == {"passed": 16}, report.to_json()


def test_a_broken_server_fails_each_case_it_breaks_for_its_own_reason() -> None:
    report = _run(RefsTarget("broken", command=[sys.executable, str(FIXTURES / "refs_broken.py")],
                             env=ENV))
    failed = {r.name: r.detail for r in report.results if r.outcome == "failed"}
    assert not report.ok
    assert set(failed) == {"placed-announced", "absent-one-way", "absent-other-owner",
                           "near-envelope-refused", "fallback-core", "host-stat",
                           "host-read-ranges", "host-upload", "host-absent",
                           "host-undeclared"}, report.to_json()
    assert "announced sha256" in failed["placed-announced"]
    assert "two unknown keys' refusals" in failed["absent-one-way"]
    assert "refused alike" in failed["absent-other-owner"]
    assert "was not refused" in failed["near-envelope-refused"]
    assert "did not declare" in failed["fallback-core"]
    assert "stat sha256" in failed["host-stat"]
    assert "read offset" in failed["host-read-ranges"]
    assert "uploaded bytes" in failed["host-upload"]
    assert "two unknown keys' refusals" in failed["host-absent"]
    assert "not as undeclared" in failed["host-undeclared"]
    assert {r.name for r in report.results if r.outcome == "passed"} == {
        "advertised", "small-inline", "resolves-exact", "derived-refused", "schema-accepts"}
    assert report.outcomes()["host-download"] == "not-applicable"
