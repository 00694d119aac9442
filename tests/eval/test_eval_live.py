"""The live tier's traces, replayed: `make eval-live` ran a slice of every suite on Gemma 3 270M
(llama-cpp-python's OpenAI-compatible server) and recorded each turn under `live-270m/<suite>/`;
the replay re-scores them with today's byref and must give the report that run wrote. A plumbing
check — a real tokenizer, chat template and tool-call output — not a measure of byref."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from byref.cli import main
from byref.eval.scoring import VERDICTS
from byref.eval.suites.selection import default_catalog

LIVE = Path(__file__).with_name("live-270m")


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    del data["timing"]
    return data


RECORDED = sorted(p.parent for p in LIVE.glob("*/eval-run.json"))


@pytest.mark.parametrize("recorded", RECORDED or [LIVE / "none"], ids=lambda p: p.name)
def test_the_recorded_270m_slice_replays_to_its_own_report(
        recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (recorded / "eval.json").is_file():
        pytest.skip("no recorded live traces: run `make eval-live` (it builds llama-cpp-python "
                    "and serves Gemma 3 270M)")
    if recorded.name == "selection" and not default_catalog().is_dir():
        pytest.skip(f"the selection suite reads the real MCP catalog at {default_catalog()}, "
                    "which this checkout has no `shared/` beside it to hold")
    assert main(["eval", "--replay", str(recorded), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    kept = report(recorded / "eval.json")
    # What the model's recorded turns decide is replayed exactly; the size of byref's own
    # rendering of each request (its system text, ref lines) is today's, not the recording's.
    replayed = report(tmp_path / "eval.json")
    for row in (*replayed["rows"], *kept["rows"]):
        row.pop("peak_chars")
    assert replayed == kept
    assert printed.startswith("byref eval: openai-chat:gemma-3-270m (tokens: ")
    rows = kept["rows"]
    assert {r["suite"] for r in rows} == {recorded.name}
    assert all(r["verdict"] in VERDICTS for r in rows)
    # Every turn the server answered was billed by it, not counted here.
    assert all(r["counted"] == "provider" for r in rows if r["turns"])
