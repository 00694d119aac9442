"""The official MCP conformance suite (npm @modelcontextprotocol/conformance 0.1.16, server
scenarios), run on our fixture server directly and through `byref gateway` in front of it.

The fixture (`fixtures/conformance_server.py`) provides what each scenario expects, so the direct
run must pass every check; the gateway run is configured as a user fronting one server would (an
`mcpServers` entry for it, a bearer token, the client sending that token: the suite has no header
option, so `fixtures/conformance_auth.mjs` adds it to each request it makes). Each run is bounded
(`RUN_TIMEOUT`); the suite needs Node >= 22, which `make upstreams` installs from npm.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NODE = ROOT / "node_modules" / ".bin" / "node"
SUITE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
FIXTURES = Path(__file__).parents[1] / "fixtures"
SERVER = FIXTURES / "conformance_server.py"
AUTH = FIXTURES / "conformance_auth.mjs"
TOKEN = "conformance-token-0123456789abcdef"
RUN_TIMEOUT = 240
ALL_CHECKS = 40

# Checks the gateway does not pass yet, each with its reason (none now). Anything else that fails
# is a regression: a scenario that passed must never fail again.
KNOWN_FAILURES: set[str] = set()
# Checks the gateway is not scored on by design. Its HTTP answers are one JSON body (measured
# ~15% cheaper than an SSE stream a request), so 'Multiple POST SSE streams should be functional'
# is reported as INFO ("Server returned JSON responses (SSE streams optional)"), not a pass.
BY_DESIGN_NOT_SCORED = 1

pytestmark = pytest.mark.skipif(
    not (NODE.exists() and SUITE.exists()),
    reason="the conformance suite and Node 22 come from npm: run `make upstreams`")

_LINE = re.compile(r"^[✓✗] (?P<name>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$")
_TOTAL = re.compile(r"^Total: (?P<passed>\d+) passed, (?P<failed>\d+) failed$", re.M)


class Run:
    def __init__(self, output: str) -> None:
        self.output = output
        self.scenarios: dict[str, tuple[int, int]] = {}
        for line in output.splitlines():
            m = _LINE.match(line.strip())
            if m:
                self.scenarios[m["name"]] = (int(m["passed"]), int(m["failed"]))
        total = _TOTAL.search(output)
        assert total is not None, output[-3000:]
        self.passed, self.failed = int(total["passed"]), int(total["failed"])

    @property
    def failing(self) -> set[str]:
        return {name for name, (_, failed) in self.scenarios.items() if failed}


def _suite(url: str, cwd: Path, env: dict[str, str] | None = None) -> Run:
    done = subprocess.run([str(NODE), str(SUITE), "server", "--url", url], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    return Run(done.stdout + done.stderr)


def _announced(proc: subprocess.Popen[str], stream: str, pattern: str) -> str:
    """The URL a process prints when it listens (read line by line; bounded by its exit)."""
    pipe = proc.stdout if stream == "stdout" else proc.stderr
    assert pipe is not None
    seen: list[str] = []
    for line in pipe:
        seen.append(line)
        m = re.search(pattern, line)
        if m:
            return m.group(0)
        if len(seen) > 200:
            break
    raise AssertionError(f"no URL announced; it said: {''.join(seen)[-2000:]}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


@pytest.fixture
def fixture_url() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        yield _announced(proc, "stdout", r"http://127\.0\.0\.1:\d+/mcp")
    finally:
        _stop(proc)


@pytest.fixture
def gateway_url(tmp_path: Path) -> Iterator[str]:
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({
        "mcpServers": {"conformance": {"command": sys.executable, "args": [str(SERVER)]}},
        "byref": {"tokens": {TOKEN: {"tenant": "local", "principal": "me"}}},
    }))
    byref = Path(sys.executable).with_name("byref")
    proc = subprocess.Popen([str(byref), "gateway", "--config", str(config), "--transport",
                             "http", "--port", "0"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        yield _announced(proc, "stderr", r"http://127\.0\.0\.1:\d+/mcp")
    finally:
        _stop(proc)


def test_the_fixture_passes_every_check_directly(fixture_url: str, tmp_path: Path) -> None:
    run = _suite(fixture_url, tmp_path)
    assert (run.passed, run.failed) == (ALL_CHECKS, 0), run.output[-4000:]


def test_through_the_gateway_every_scored_check_passes(gateway_url: str, tmp_path: Path) -> None:
    run = _suite(gateway_url, tmp_path, {"BYREF_CONFORMANCE_TOKEN": TOKEN,
                                         "NODE_OPTIONS": f"--import={AUTH.as_uri()}"})
    unexpected = run.failing - KNOWN_FAILURES
    assert not unexpected, f"regressed: {sorted(unexpected)}\n{run.output[-4000:]}"
    # Every scenario ran (a missing one would hide a failure).
    assert len(run.scenarios) == 30, sorted(run.scenarios)
    assert run.passed >= ALL_CHECKS - BY_DESIGN_NOT_SCORED - len(KNOWN_FAILURES), run.output[-4000:]
    # The one check not scored: JSON answers, so "SSE streams functional" is INFO, not a pass.
    assert run.scenarios["server-sse-multiple-streams"] == (2 - BY_DESIGN_NOT_SCORED, 0)
