"""What the refs extension's tests start: the gateway over a probe upstream (stdio or HTTP) and
the fixture servers, each as its own process; an HTTP one is yielded once it says `listening on`."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from _waits import scaled

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "gateway" / "fixtures"
ENV = {"PYTHONPATH": str(ROOT / "src")}
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef0000"
"""The two bearer tokens (two owners) of every HTTP server here (`fixtures/_refs_http.py`)."""


def gateway_config(tmp_path: Path, *, tokens: bool = False) -> Path:
    """A gateway config over the probe upstream (a process); with `tokens`, ALICE and BOB."""
    config = tmp_path / "gateway.json"
    body: dict[str, object] = {"mcpServers": {"probe": {
        "command": sys.executable, "args": [str(FIXTURES / "refs_probe.py")], "env": ENV}}}
    if tokens:
        body["byref"] = {"tokens": {ALICE: {"tenant": "t", "principal": "alice"},
                                    BOB: {"tenant": "t", "principal": "bob"}}}
    config.write_text(json.dumps(body))
    return config


def gateway_argv(config: Path, *extra: str) -> list[str]:
    """The gateway's command line."""
    return [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config), *extra]


@asynccontextmanager
async def listening(argv: Sequence[str]) -> AsyncIterator[str]:
    """Start `argv` and yield the URL it says it is `listening on` (killed after)."""
    async with await anyio.open_process(list(argv), env={**__import__("os").environ, **ENV},
                                        stderr=-1) as process:
        try:
            said = b""
            with anyio.fail_after(scaled(60)):
                assert process.stderr is not None
                while b"listening on " not in said or not said.split(
                        b"listening on ", 1)[1].count(b"\n"):
                    chunk = await process.stderr.receive()
                    said += chunk
            yield said.split(b"listening on ", 1)[1].split()[0].decode()
        finally:
            process.terminate()
            with anyio.move_on_after(scaled(10)):
                await process.wait()
            if process.returncode is None:
                process.kill()
