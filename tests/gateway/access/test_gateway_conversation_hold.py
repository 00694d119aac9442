"""One stdio gateway per conversation: while `byref gateway --conversation ID` serves, a second
one on the same ID refuses to start (one line saying what to do, exit 2) — on the SQLite state
beside a file store and on PostgreSQL; another ID starts beside it; the conversation is free again
once its gateway exits, and once it is killed with SIGKILL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from _gateway_rig import World

from _waits import scaled

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "hold-test", "version": "1"}}}) + "\n"


def _serving(config: Path, *state: str, conversation: str) -> subprocess.Popen[str]:
    """A stdio gateway on `conversation` that has answered an initialize (so it is serving)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config),
         "--conversation", conversation, *state],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(INIT)
    proc.stdin.flush()
    line = proc.stdout.readline()  # bounded: it answers, or exits (EOF)
    assert '"result"' in line, line + (proc.stderr.read() if proc.stderr else "")
    return proc


def _refused(config: Path, *state: str, conversation: str) -> str:
    """A second gateway on `conversation`: its exit code must be 2; its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config),
         "--conversation", conversation, *state],
        input="", capture_output=True, text=True, timeout=scaled(60))
    assert done.returncode == 2, (done.returncode, done.stderr)
    return done.stderr


def _stop(proc: subprocess.Popen[str], *, kill: bool = False) -> None:
    if kill:
        proc.kill()
    else:
        assert proc.stdin is not None
        proc.stdin.close()  # stdin's end stops a stdio gateway
    proc.wait(30)


def _check(config: Path, *state: str) -> None:
    first = _serving(config, *state, conversation="shared-id")
    others: list[subprocess.Popen[str]] = [first]
    try:
        said = _refused(config, *state, conversation="shared-id")
        assert said == (
            "byref gateway: conversation 'shared-id' ('local/stdio/shared-id') is in use by "
            "another byref gateway; stop that one, resume a different --conversation ID, or "
            "run both as replicas (byref.replicas with PostgreSQL state).\n"), said
        others.append(_serving(config, *state, conversation="another-id"))  # beside it
        _stop(first)
        second = _serving(config, *state, conversation="shared-id")  # free after an exit
        others.append(second)
        _stop(second, kill=True)  # SIGKILL: the kernel / the server drops the hold
        others.append(_serving(config, *state, conversation="shared-id"))
        _refused(config, *state, conversation="shared-id")
    finally:
        for proc in others:
            if proc.poll() is None:
                _stop(proc, kill=True)


def _config(world: World) -> Path:
    config = world.root / "hold.json"
    config.write_text(json.dumps({"mcpServers": {"echo": world.fixture("meta_echo.py")}}))
    return config


def test_sqlite_beside_the_file_store_holds_a_conversation(world: World) -> None:
    _check(_config(world), "--store", f"file://{world.root / 'store'}")


def test_postgresql_holds_a_conversation(world: World, postgres_state: str) -> None:
    _check(_config(world), "--state", postgres_state)
