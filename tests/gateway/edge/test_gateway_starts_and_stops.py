"""`byref gateway` started and stopped the ordinary ways ends cleanly: exit 0 and at most one line.

Started with stdin or stdout on /dev/null, closed, or a regular file (a service manager, `nohup`,
a shell script), on uvloop and on asyncio's own loop; stopped by SIGTERM (Docker, systemd,
Kubernetes), SIGINT (Ctrl-C) or SIGHUP over stdio and over HTTP, HTTP with a client's standing
notification stream and a 2026-07-28 listen stream open (a graceful stop ends them rather than
waiting out its grace)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import FIXTURES
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled

TOKEN = "a-long-random-token-for-stop-tests-0001"
LOOPS = ["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(
    importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed (byref[mcp])"))]
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({
        "mcpServers": {"changing": {"command": sys.executable,
                                    "args": [str(FIXTURES / "changing.py")]}},
        "byref": {"tokens": {TOKEN: {"tenant": "t", "principal": "p"}}}}))
    return path


def _gateway(config: Path, loop: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config), "--loop", loop,
            *more]


def _quiet(stderr: bytes, allowed: str = "") -> None:
    """At most one line, and no traceback."""
    said = stderr.decode(errors="replace")
    lines = [line for line in said.splitlines() if line and not line.startswith(allowed or "\0")]
    assert len(lines) <= 1 and "Traceback" not in said, said


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("wiring", ["stdin /dev/null", "stdout /dev/null", "stdin closed",
                                    "stdout closed", "all closed", "stdin a file"])
def test_stdin_or_stdout_not_a_pipe_exits_cleanly(tmp_path: Path, loop: str, wiring: str) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(PING)
    answers = tmp_path / "answers.jsonl"
    feed = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert feed.stdout is not None and feed.stdin is not None
    options: dict[str, Any] = {
        "stdin /dev/null": {"stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE},
        # stdin a pipe that ends: the gateway serves, then stops at its end.
        "stdout /dev/null": {"stdin": feed.stdout, "stdout": subprocess.DEVNULL},
        "stdin closed": {"stdin": None, "stdout": subprocess.PIPE,
                         "preexec_fn": lambda: _close(0)},
        "stdout closed": {"stdin": feed.stdout, "stdout": None,
                          "preexec_fn": lambda: _close(1)},
        "all closed": {"stdin": None, "stdout": None, "preexec_fn": lambda: _close(0, 1, 2)},
        "stdin a file": {"stdin": requests.open("rb"), "stdout": answers.open("wb")},
    }[wiring]
    feed.stdin.write(PING)
    feed.stdin.close()
    stderr = subprocess.PIPE if wiring != "all closed" else None
    done = subprocess.run(_gateway(_config(tmp_path), loop), stderr=stderr, timeout=scaled(60),
                          **options)
    feed.stdout.close()
    feed.wait(10)
    assert done.returncode == 0, (done.returncode, done.stderr)
    _quiet(done.stderr or b"")
    if wiring == "stdin a file":  # a file of requests is served, as a pipe of them is
        assert json.loads(answers.read_text()) == {"jsonrpc": "2.0", "id": 1, "result": {}}


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            import os

            os.close(fd)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_exits_cleanly(tmp_path: Path, loop: str, transport: str,
                                     signum: int) -> None:
    more = ("--transport", "http", "--port", "0") if transport == "http" else ()
    process = subprocess.Popen(_gateway(_config(tmp_path), loop, *more), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    try:
        if transport == "http":
            assert b"listening on" in process.stderr.readline()
        else:  # serving: it answered a request
            process.stdin.write(PING)
            process.stdin.flush()
            assert json.loads(process.stdout.readline())["id"] == 1
        process.send_signal(signum)
        _out, err = process.communicate(timeout=scaled(60))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, (process.returncode, err)
    _quiet(err)


@pytest.mark.anyio
@pytest.mark.parametrize("loop", LOOPS)
async def test_sigterm_over_http_ends_open_streams_and_exits_quietly(tmp_path: Path,
                                                                     loop: str) -> None:
    command = _gateway(_config(tmp_path), loop, "--transport", "http", "--port", "0")
    headers = {"Authorization": f"Bearer {TOKEN}"}

    def client(**options: Any) -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers=headers)), **options)

    with anyio.fail_after(scaled(60)):
        async with await anyio.open_process(command, stderr=subprocess.PIPE) as process:
            assert process.stderr is not None
            said = b""
            while b"listening on " not in said or not said.endswith(b"\n"):
                said += await process.stderr.receive()
            url = said.decode().split("listening on ", 1)[1].split()[0]
            ended = False
            with contextlib.suppress(Exception):  # the clients see their server go away
                async with client(mode="legacy") as legacy, client() as modern:
                    await legacy.list_tools()  # a session with its standing GET stream
                    assert modern.protocol_version == "2026-07-28"
                    async with modern.listen(tools_list_changed=True) as subscription:
                        process.send_signal(signal.SIGTERM)
                        async for _ in subscription:
                            pass
                        ended = True  # the stream ended, not broke
            code = await process.wait()
            rest = b""
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
                while True:
                    rest += await process.stderr.receive()
    assert code == 0, rest
    assert ended
    # Nothing but the address: no traceback, no "timeout graceful shutdown exceeded".
    assert rest.decode(errors="replace").strip() == "", rest
