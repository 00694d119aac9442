"""Operator-facing lines say what failed: the command that could not start, the HTTP status a
remote server answered, the address that is taken. Each class, with its message pinned."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled

pytestmark = pytest.mark.anyio


async def _call(world: World, servers: dict[str, dict[str, Any]], name: str) -> str:
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_, server), Client(server) as client:
            result = await client.call_tool("call_tool", {"name": name, "arguments": {}})
            assert result.is_error
            return text(result)


@pytest.mark.parametrize(("command", "cwd", "why", "kind"), [
    ("mcp-server-tiem", None, "the command 'mcp-server-tiem' was not found on PATH",
     "its command was not found"),
    ("/nowhere/bin/server", None, "the command '/nowhere/bin/server' was not found",
     "its command was not found"),
    (sys.executable, "/nowhere/dir", "its working directory '/nowhere/dir' does not exist",
     "its working directory does not exist"),
    ("{readme}", None, "the command '{readme}' is not executable (permission denied)",
     "its command could not be run (permission denied)"),
])
async def test_a_server_that_cannot_start_names_its_command_to_the_operator(
        world: World, command: str, cwd: str | None, why: str, kind: str) -> None:
    """The operator's line names the command or directory; a client is told the class of
    failure alone (a configured value never reaches a client)."""
    readme = str(Path(__file__).resolve().parents[3] / "README.md")  # a file, not executable
    command, why = command.replace("{readme}", readme), why.replace("{readme}", readme)
    entry: dict[str, Any] = {"command": command, **({"cwd": cwd} if cwd else {})}
    said = await _call(world, {"typo": entry}, "typo__anything")
    assert said == f"'typo__anything' cannot run now: Server 'typo' could not be started: {kind}."
    assert f"byref gateway: Server 'typo' could not be started: {why}.\n" in (
        world.log.read_text())


@contextmanager
def _refusing(status: int) -> Iterator[str]:
    """A remote MCP endpoint on loopback that answers every request with `status`."""

    class Refuse(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"no")

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=scaled(10))


@pytest.mark.parametrize(("status", "reason"), [(401, "Unauthorized"), (403, "Forbidden"),
                                                (500, "Internal Server Error")])
async def test_a_remote_server_refusing_says_its_http_status(
        world: World, status: int, reason: str) -> None:
    with _refusing(status) as url:
        said = await _call(world, {"remote": {"url": url, "timeout": scaled(10)}}, "remote__x")
    why = f"Server returned an error response (HTTP {status} {reason})"
    assert said == (f"'remote__x' cannot run now: Server 'remote' could not be started: it "
                    f"answered HTTP {status} {reason}.")
    assert f"byref gateway: Server 'remote' could not be started: {why}.\n" in (
        world.log.read_text())


async def test_a_remote_server_refusing_a_call_says_its_http_status(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    """A token revoked mid-session: the server's 401 on a call (not at start) is named, where the
    SDK's words alone were 'Server returned an error response'."""
    token = "a-token-the-server-revokes-0123456789"
    script = str(Path(__file__).parents[1] / "fixtures" / "revoking_server.py")
    with anyio.fail_after(scaled(90)), world.log.open("a") as errlog:
        async with await anyio.open_process([sys.executable, script, token],
                                            stderr=errlog) as remote:
            try:
                assert remote.stdout is not None
                seen = b""
                while not seen.endswith(b"\n"):
                    seen += await remote.stdout.receive()
                entry = {"url": seen.decode().strip(), "timeout": scaled(20),
                         "headers": {"Authorization": f"Bearer {token}"}}
                async with running(world, {"remote": entry}) as (_, server), Client(
                        server) as client:
                    async def call(name: str, **arguments: Any) -> Any:
                        return await client.call_tool("call_tool", {"name": name,
                                                                    "arguments": arguments})

                    assert text(await call("remote__echo", text="hi")) == "hi"
                    assert text(await call("remote__revoke")) == "revoked"
                    refused = await call("remote__echo", text="hi")
            finally:
                remote.terminate()
    assert refused.is_error
    why = "Server returned an error response (HTTP 401 Unauthorized)"
    assert text(refused) == f"Server 'remote' refused running 'echo': {why}"
    assert f"upstream 'remote': Server 'remote' refused running 'echo': {why}" in [
        r.getMessage() for r in caplog.records if r.name == "byref.gateway"]


def test_a_port_in_use_is_named(tmp_path: Path) -> None:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}},
                                  "byref": {"tokens": {"a-long-random-token-0123456789": {
        "tenant": "t", "principal": "p"}}}}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config),
             "--transport", "http", "--port", str(port)],
            capture_output=True, text=True, timeout=scaled(120))
    assert done.returncode == 2
    assert done.stderr == (
        f"byref gateway: cannot listen on 127.0.0.1:{port}: Address already in use (another "
        "process holds it; pick another --port, or --port 0 for any free one).\n")
