"""Shared rigs for the lens tests: one real `byref demo --out` run, and the lens serving it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from _lens_rig import BYREF, SCREENSHOTS, DemoRun

from _waits import scaled
from byref.lens import Lens, load_run, make_server, url_of


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`byref demo --out DIR --json`, through the command line a user runs."""
    out = tmp_path_factory.mktemp("lens-demo") / "run"
    done = subprocess.run([*BYREF, "demo", "--out", str(out), "--json"], capture_output=True,
                          text=True, timeout=scaled(300), check=True)
    return DemoRun(out, json.loads(done.stdout))


@pytest.fixture
def served() -> Iterator[Any]:
    """Serve a Lens over the standard library's server on a free loopback port."""
    import threading

    servers = []

    def serve(lens: Lens) -> str:
        server = make_server(lens, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return url_of(server)

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def demo_lens(demo_run: DemoRun) -> Lens:
    return Lens(load_run(demo_run.out))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for shot in SCREENSHOTS:
        terminalreporter.write_line(f"lens screenshot: {shot}")
