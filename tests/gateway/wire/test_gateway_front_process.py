"""`byref gateway` over stdio with its front (`wire.front`) against the same gateway with the
switch on (`BYREF_SDK_PATHS_ONLY=1`: every answer the SDK's, as before the front): the same
answers in both generations, bad lines included; the recording is what the full gateway answers
now; and whole sessions of the official client through the front."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import FIXTURES, text
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from _waits import scaled
from byref.gateway.edge.front_answers import dumps, record
from byref.gateway.wire import front

CONVERSATION = "stdio-conversation-of-this-test"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"mcpServers": {"echo": {
        "command": sys.executable, "args": [str(FIXTURES / "meta_echo.py")]}}}))
    return path


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def _exchange(config: Path, lines: list[bytes], answers: int, *, front_on: bool
              ) -> tuple[list[dict[str, Any]], str]:
    """The first `answers` answers `byref gateway` gives to `lines` (sent at once), and its
    stderr."""
    env = {k: v for k, v in os.environ.items() if k != "BYREF_SDK_PATHS_ONLY"}
    if not front_on:
        env["BYREF_SDK_PATHS_ONLY"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    got: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            got.put(json.loads(line))
        got.put(None)

    threading.Thread(target=read, daemon=True).start()
    try:
        proc.stdin.write(b"".join(line + b"\n" for line in lines))
        proc.stdin.flush()
        out = []
        for _ in range(answers):
            answer = got.get(timeout=scaled(60))
            assert answer is not None, f"the gateway exited after {out}"
            out.append(answer)
        proc.stdin.close()
        proc.wait(scaled(30))
        said = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(scaled(30))
        proc.stdout.close()
        proc.stderr.close()
    return out, said


def _same(config: Path, lines: list[bytes], answers: int) -> list[dict[str, Any]]:
    with_front, said = _exchange(config, lines, answers, front_on=True)
    without, said_without = _exchange(config, lines, answers, front_on=False)
    # Each process names a new conversation: the same text but for its id.
    ours, theirs = _conversation(said), _conversation(said_without)

    def key(a: dict[str, Any], conversation: str) -> str:
        return json.dumps(a, sort_keys=True).replace(conversation, CONVERSATION)
    assert (sorted(key(a, ours) for a in with_front)
            == sorted(key(a, theirs) for a in without))
    return [json.loads(key(a, ours)) for a in with_front]


def _conversation(stderr: str) -> str:
    """The conversation a stdio gateway said it started, once (the front said it; the full
    gateway it handed over to did not again)."""
    found = re.findall(r"stdio conversation '(stdio-[0-9a-f]{16})'", stderr)
    assert len(found) == 1, stderr
    return str(found[0])


INITIALIZE = _line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}})
INITIALIZED = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
DISCOVER = _line({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                  "params": {"_meta": META}})
DEEP = b'{"jsonrpc":"2.0","id":4,"method":"ping","params":' + b"[" * 3000 + b"]" * 3000 + b"}"


def test_the_recording_is_what_the_full_gateway_answers() -> None:
    recorded = anyio.run(record)
    assert dumps(recorded) == front.ANSWERS.read_text(encoding="utf-8"), (
        "the gateway's first answers changed: re-record them with "
        "python -m byref.gateway.edge.front_answers")


def test_a_handshake_session_is_answered_as_without_the_front(tmp_path: Path) -> None:
    answers = _same(_config(tmp_path), [
        INITIALIZE, INITIALIZED, _line({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        _line({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})], 3)
    assert {a["id"] for a in answers} == {1, 2, 3}
    assert CONVERSATION in answers[0]["result"]["serverInfo"]["description"]


def test_a_2026_07_28_session_is_answered_as_without_the_front(tmp_path: Path) -> None:
    answers = _same(_config(tmp_path), [
        DISCOVER, _line({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": META}}),
        INITIALIZE.replace(b'"id": 1', b'"id": 3')], 3)
    discovered = next(a for a in answers if a["id"] == 1)["result"]
    assert discovered["supportedVersions"][0] == "2026-07-28"
    assert CONVERSATION in discovered["_meta"]["io.modelcontextprotocol/serverInfo"][
        "description"]


def test_bad_lines_get_the_errors_they_get_without_the_front(tmp_path: Path) -> None:
    config = _config(tmp_path)
    answers = _same(config, [
        INITIALIZE, INITIALIZED, DEEP, b"\xef\xbb\xbf" + _line(
            {"jsonrpc": "2.0", "id": 5, "method": "ping"}), b'{"jsonrpc": "2.0", "id": 6,',
        _line({"jsonrpc": "2.0", "id": 7, "method": "ping"})], 5)
    errors = {a["id"]: a["error"]["code"] for a in answers if "error" in a}
    assert errors == {4: -32600, 5: -32600, None: -32700}
    # First lines the front does not take: everything is the full gateway's.
    _same(config, [b"\xef\xbb\xbf" + DISCOVER, DISCOVER.replace(b'"id": 1', b'"id": 2')], 2)
    _same(config, [DEEP, INITIALIZE], 2)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_official_client_works_through_the_front(tmp_path: Path, mode: str) -> None:
    config = _config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "BYREF_SDK_PATHS_ONLY"}
    with anyio.fail_after(scaled(60)), (tmp_path / "err.log").open("a") as errlog:
        async with Client(stdio_client(StdioServerParameters(
                command=sys.executable, args=["-m", "byref.cli", "gateway", "--config",
                                              str(config)], env=env), errlog=errlog),
                mode=mode) as client:  # type: ignore[arg-type]
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"search_tools", "activate_tool", "call_tool"} <= names
            result = await client.call_tool("call_tool", {"name": "echo__echo_meta",
                                                          "arguments": {}})
            assert not result.is_error, text(result)


def test_a_resumed_conversation_is_held_before_the_front_answers(tmp_path: Path) -> None:
    config = _config(tmp_path)
    command = [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config), "--store",
               f"file://{tmp_path / 'store'}", "--conversation", "resumed"]
    first = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    assert first.stdin is not None and first.stdout is not None
    try:
        first.stdin.write(INITIALIZE + b"\n")
        first.stdin.flush()
        answer = json.loads(first.stdout.readline())  # bounded: it answers, or exits (EOF)
        assert "'resumed'" in answer["result"]["serverInfo"]["description"]
        # Answered means held: a second gateway on it answers nothing and exits 2.
        second = subprocess.run(command, input=INITIALIZE + b"\n", capture_output=True,
                                timeout=scaled(60))
        assert (second.returncode, second.stdout) == (2, b""), second
        assert b"is in use by another byref gateway" in second.stderr
    finally:
        first.stdin.close()
        first.wait(scaled(30))
        first.stdout.close()
