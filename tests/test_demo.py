"""The status-report round trip: the ledger's promises, and what the model never saw."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from _waits import scaled
from byref.cli.demo import _table
from byref.demo.data import open_rows, parse_size, plan
from byref.demo.scenario import run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(out)


def test_ledger_meets_the_promises(demo: tuple[Path, object]) -> None:
    _, result = demo
    r = result.report  # type: ignore[attr-defined]
    assert r["rows_expected"] == 148
    assert r["byref"]["model_read_chars"] <= 7_000
    assert r["byref"]["model_written_chars"] <= 400
    assert r["byref"]["rows_delivered"] == 148
    assert r["byref"]["rows_identical"] is True
    assert r["naive"]["run"] is True
    assert r["ratio_read"] >= 300
    assert 2_000_000 <= r["export_bytes"] <= 2_200_000
    assert Path(r["pdf"]).read_bytes().startswith(b"%PDF")


def test_the_readme_shows_the_table_the_demo_prints(demo: tuple[Path, object]) -> None:
    _, result = demo
    report = {**result.report, "pdf": "byref-demo/status-report.pdf"}  # `byref demo`'s --out
    printed = "\n".join(_table(report))
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    shown = readme.split("## What the demo shows", 1)[1].split("```", 2)[1].strip("\n")
    # Token counts move by a few with the random art_ keys a run mints; the rest is exact.
    for shown_line, printed_line in zip(shown.splitlines(), printed.splitlines(), strict=True):
        if "(tokens)" in printed_line:
            pairs = zip(shown_line.split()[3:], printed_line.split()[3:], strict=True)
            for readme_n, run_n in ((int(a.replace(",", "")), int(b.replace(",", "")))
                                    for a, b in pairs):
                assert abs(readme_n - run_n) <= max(5, run_n // 200), (shown_line, printed_line)
        else:
            assert shown_line == printed_line, "README.md's demo table is stale: paste what " \
                "`byref demo` prints"


def test_model_never_saw_a_recipe_a_row_or_a_storage_path(demo: tuple[Path, object]) -> None:
    out, result = demo
    seen = "\n".join(req.all_text() for req in result.requests)  # type: ignore[attr-defined]
    assert "JsonPointer" not in seen and "JsonQuery" not in seen
    export = out / "export.json"
    for line in export.read_bytes().splitlines():
        line = line.strip().rstrip(b",")
        if line.startswith(b'{"id"'):
            row = json.loads(line)
            assert msgspec.json.encode(row).decode() not in seen
            assert row["description"] not in seen
    for path in (str(out), str(out.resolve()), "artifacts/", ".bin", str(out / "store")):
        assert path not in seen


def test_transcript_and_store_land_in_out(demo: tuple[Path, object]) -> None:
    out, _ = demo
    lines = (out / "transcript.jsonl").read_text().splitlines()
    assert len(lines) == 8
    assert any((out / "store").rglob("*.bin"))


def test_scaled_sizes_plan() -> None:
    assert parse_size("20MB") == 20_000_000 and parse_size("2GB") == 2_000_000_000
    items, open_items = plan(200_000_000)
    assert open_items == round(148 * 200 / 2.1)
    assert items > 300_000
    with pytest.raises(ValueError, match="Cannot read size '2 parsecs'"):
        parse_size("2 parsecs")


def test_naive_above_the_memory_line_is_computed_not_run(tmp_path: Path) -> None:
    result = run_demo(tmp_path, 300_000, naive=False)
    n = result.report["naive"]
    assert n["run"] is False
    assert n["model_read_chars"] > result.report["export_bytes"]
    assert n["rows_delivered"] == len(open_rows(tmp_path / "export.json"))


def test_cli_json_has_the_documented_keys(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "byref.cli", "demo", "--out", str(tmp_path), "--json"],
        capture_output=True, text=True, timeout=scaled(300), check=True,
    )
    report = json.loads(done.stdout)
    assert done.stderr == ""  # piped: no progress bar
    for key in ("model_read_chars", "model_written_chars", "peak_request_chars",
                "rows_delivered", "rows_identical"):
        assert key in report["byref"]
    for key in ("model_read_chars", "model_written_chars", "run"):
        assert key in report["naive"]
    for key in ("rows_expected", "ratio_read", "pdf"):
        assert key in report
