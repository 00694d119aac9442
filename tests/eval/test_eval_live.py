"""The live tier's traces, replayed: `make eval-live` ran a slice of every suite on Gemma 3 270M
(llama-cpp-python's OpenAI-compatible server) and recorded each turn under `live-270m/`; the
replay re-scores them with today's byref and must give the report that run wrote. A plumbing
check — a real tokenizer, chat template and tool-call output — not a measure of byref."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from byref.cli import main
from byref.eval.scoring import VERDICTS

LIVE = Path(__file__).with_name("live-270m")


def report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    del data["timing"]
    return data


def test_the_recorded_270m_slice_replays_to_its_own_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (LIVE / "eval-run.json").is_file():
        pytest.skip("no recorded live traces: run `make eval-live` (it builds llama-cpp-python "
                    "and serves Gemma 3 270M)")
    assert main(["eval", "--replay", str(LIVE), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    recorded = report(LIVE / "eval.json")
    assert report(tmp_path / "eval.json") == recorded
    assert printed.startswith("byref eval: openai-chat:gemma-3-270m (tokens: provider-reported")
    rows = recorded["rows"]
    assert {r["suite"] for r in rows} >= {"nestful", "corpus", "status"}
    assert all(r["verdict"] in VERDICTS for r in rows)
    # Every turn that reached the server was billed by it, not counted here.
    assert all(r["counted"] == "provider" for r in rows if r["turns"])
