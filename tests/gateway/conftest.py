"""Gateway test rig: the real reference servers (installed by `make test`), small misbehaving
upstreams from fixtures/, and a gateway run in-process for the official `mcp` client to drive.

A test that needs a server `make test` did not install skips and says which one and how to get it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from _gateway_rig import PG_URL, World

from byref.bench.gateway.run import make_repo, reference_servers


@pytest.fixture
def world(tmp_path: Path) -> World:
    files = tmp_path / "files"
    files.mkdir()
    db = tmp_path / "items.db"
    repo = make_repo(tmp_path / "repo")
    servers, missing = reference_servers(repo, files, db)
    return World(tmp_path, repo, files, db, servers, missing, tmp_path / "upstreams.log")


@pytest.fixture
def postgres_state() -> Iterator[str]:
    """A state URL on PostgreSQL with tables of its own, dropped afterwards."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (byref[postgres])")
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable at {PG_URL!r} (set BYREF_TEST_POSTGRES_URL): {exc}")
    table = f"gw_{secrets.token_hex(4)}"
    yield f"{PG_URL}?table={table}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for suffix in ("conversations", "lines", "usage", "tasks"):
            conn.execute(f'DROP TABLE IF EXISTS "{table}_{suffix}"')
