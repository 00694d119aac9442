"""Gateway test rig: the real reference servers (installed by `make test`), small misbehaving
upstreams from fixtures/, and a gateway run in-process for the official `mcp` client to drive.

A test that needs a server `make test` did not install skips and says which one and how to get it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _gateway_rig import World

from byref.bench.gateway import make_repo, reference_servers


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def world(tmp_path: Path) -> World:
    files = tmp_path / "files"
    files.mkdir()
    db = tmp_path / "items.db"
    repo = make_repo(tmp_path / "repo")
    servers, missing = reference_servers(repo, files, db)
    return World(tmp_path, repo, files, db, servers, missing, tmp_path / "upstreams.log")
