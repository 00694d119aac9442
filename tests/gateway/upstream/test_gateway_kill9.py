"""No process started for an upstream outlives the gateway, however it ends: after SIGKILL (no
stop runs) the warden ends the upstream's process group, its children with it.

Real processes: `byref gateway` over stdio, an upstream (`fixtures/forking.py`) that starts
`sleep 120` in its group; the gateway is killed with SIGKILL once both run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _gateway_rig import FIXTURES

DEADLINE = 20.0


def _gone(pid: int) -> bool:
    """Whether `pid` no longer runs (a zombie waiting to be reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {DEADLINE:g} s: {what}"
        time.sleep(0.02)


def test_sigkill_of_the_gateway_leaves_no_upstream_process(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"forking": {
        "command": sys.executable, "args": [str(FIXTURES / "forking.py")],
        "env": {"FORKING_PIDS": str(pids_file)}}}}))
    gateway = subprocess.Popen(
        [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert gateway.stdin is not None
    try:
        for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "search_tools", "arguments": {"query": "noop"}}}):
            gateway.stdin.write(json.dumps(message).encode() + b"\n")
        gateway.stdin.flush()
        _wait_for(pids_file.exists, "the upstream and its child started")
        upstream, child = map(int, pids_file.read_text().split())
        assert not _gone(upstream) and not _gone(child)
        gateway.send_signal(signal.SIGKILL)
        gateway.wait(10)
        _wait_for(lambda: _gone(upstream) and _gone(child),
                  f"upstream {upstream} and its child {child} gone after the gateway's SIGKILL")
    finally:
        gateway.kill()
        gateway.wait(10)
        for pid in (locals().get("upstream"), locals().get("child")):
            if isinstance(pid, int) and not _gone(pid):
                os.kill(pid, signal.SIGKILL)
