"""The status-report job end to end through each real adapter (Anthropic, OpenAI Responses,
Chat Completions against OpenAI and against a compatible server), the "model" on a mock transport.

Same guarantees as the scripted run: the rows generate_pdf receives are byte-identical to the
export's open items, and no recipe, row or storage path ever crosses the wire to the model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _waits import scaled
from byref.demo.data import open_rows, write_export
from byref.demo.scenario import OPEN, TITLE, run_byref
from byref.harness.providers import model_from_id
from byref.jsonview import encode
from doubles.chat_wire import c_call, c_completion, c_json, c_last_result, c_results, c_sse
from doubles.wire import (
    A_MODEL,
    Wire,
    a_json,
    a_last_result,
    a_message,
    a_sse,
    a_text,
    a_tool_use,
    a_turn,
    o_call,
    o_json,
    o_last_result,
    o_outputs,
    o_response,
    o_sse,
    o_text,
)

SIZE = 400_000


def status_report_call(turn: int, last: Any) -> tuple[str, dict[str, Any]] | None:
    """The model's part: what a model does at each turn, reading refs out of what it was shown."""
    if turn == 0:
        return "export_work_items", {"project": "ATLAS"}
    if turn == 1:
        return "query_json", {"source": last["value"], "path": "/items", "filter": OPEN}
    if turn == 2:
        return "generate_pdf", {"title": TITLE, "rows": last["value"]}
    return None


def anthropic_play(written: list[Any], stream: bool) -> Any:
    reply = a_sse if stream else a_json

    def play(body: dict[str, Any]) -> Any:
        turn = a_turn(body)
        step = status_report_call(turn, a_last_result(body) if turn else None)
        if step is None:
            return reply(a_message(a_text("Done: the PDF status report is ready.")))
        written.append(step[1])
        return reply(a_message(a_tool_use(*step)))

    return play


def chat_play(written: list[Any], stream: bool) -> Any:
    reply = c_sse if stream else c_json

    def play(body: dict[str, Any]) -> Any:
        turn = c_results(body)
        step = status_report_call(turn, c_last_result(body) if turn else None)
        if step is None:
            return reply(c_completion("Done: the PDF status report is ready."))
        written.append(step[1])
        return reply(c_completion(None, c_call(*step)))

    return play


def openai_play(written: list[Any], stream: bool) -> Any:
    reply = o_sse if stream else o_json

    def play(body: dict[str, Any]) -> Any:
        turn = o_outputs(body)
        step = status_report_call(turn, o_last_result(body) if turn else None)
        if step is None:
            return reply(o_response(o_text("Done: the PDF status report is ready.")))
        written.append(step[1])
        return reply(o_response(o_call(*step)))

    return play


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export") / "export.json"
    write_export(path, SIZE)
    return path


LOCAL = "http://127.0.0.1:11434/v1"
ADAPTERS: dict[str, tuple[str, Any, dict[str, Any], int]] = {
    # name: model id, the model's play, model options, prompt-cache tokens read per turn
    "anthropic": (f"anthropic:{A_MODEL}", anthropic_play, {}, 900),
    "openai": ("openai:gpt-5", openai_play, {}, 896),
    "openai-chat": ("openai-chat:gpt-4o", chat_play, {}, 896),
    "openai-chat-compatible": ("openai-chat:llama3.1", chat_play, {"base_url": LOCAL}, 896),
}


def carries(body: Any, text: str) -> bool:
    """Whether `text` is in a request body: in its JSON, or inside a string of it (OpenAI
    carries arguments as JSON text)."""
    if isinstance(body, str):
        return text in body
    if isinstance(body, dict):
        return any(carries(v, text) for v in body.values())
    if isinstance(body, list):
        return any(carries(v, text) for v in body)
    return False


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", list(ADAPTERS))
def test_status_report_through_a_real_adapter(provider: str, stream: bool, export: Path,
                                              tmp_path: Path) -> None:
    written: list[Any] = []
    model_id, play, options, cached = ADAPTERS[provider]
    wire = Wire(play(written, stream))
    model = model_from_id(model_id, api_key="test", http_client=wire.client(), max_retries=0,
                          stream=stream, **options)
    figures, requests, delivered = run_byref(export, tmp_path, model)

    expected = open_rows(export)
    assert len(expected) > 20
    assert encode(delivered.rows) == encode(expected)  # byte-identical rows
    assert figures["requests"] == len(wire.raw) == 4
    assert figures["provider_usage"]["turns"] == 4
    assert figures["provider_usage"]["cache_read_tokens"] == 4 * cached
    sent = wire.sent()
    assert "JsonPointer" not in sent and "JsonQuery" not in sent
    escaped = json.dumps(sent)  # request bodies carry tool results as JSON inside JSON
    for row in expected:  # the preview shows elided descriptions; never a whole one, nor a row
        assert json.dumps(row["description"])[1:-1] not in sent
        assert json.dumps(row["description"])[1:-1] not in escaped
        assert encode(row).decode() not in sent
    for leak in (str(tmp_path), "artifacts/", ".bin"):
        assert leak not in sent
    # Every $ref the model wrote went back to it intact on the next turn.
    refs = [written[1]["source"], written[2]["rows"]]
    assert [set(r) for r in refs] == [{"$ref"}, {"$ref"}]
    assert [r["$ref"]["type"] for r in refs] == ["Blob", "Message"]  # a recipe is never shown
    for ref, body in zip(refs, wire.bodies[2:], strict=True):
        compact = json.dumps(ref, separators=(",", ":"))
        assert compact in json.dumps(body, separators=(",", ":")) or carries(body, compact)
    assert requests[-1].all_text() and "JsonPointer" not in requests[-1].all_text()


def _env_without_keys() -> dict[str, str]:
    drop = {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"}
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.mark.parametrize(("model_id", "variable"), [
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"), ("openai:gpt-5", "OPENAI_API_KEY")])
def test_demo_with_a_model_and_no_key_says_which_variable_to_set(
        model_id: str, variable: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "byref.cli", "demo", "--model", model_id, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=scaled(120), env=_env_without_keys(),
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"byref demo: No API key for model {model_id!r}: set {variable} in the environment (or "
        "pass api_key=... or a ready client). Without --model the demo runs offline with the "
        "scripted model.\n")
    assert not (tmp_path / "export.json").exists()  # nothing was generated for a run that cannot


def test_demo_with_an_unknown_provider_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "byref.cli", "demo", "--model", "mistral:large", "--out",
         str(tmp_path)], capture_output=True, text=True, timeout=scaled(120),
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "byref demo: Unknown model provider 'mistral' in 'mistral:large'; known providers: "
        "'anthropic', 'openai', 'openai-chat'.")
