"""Fixtures for the conversation-state tests: a real PostgreSQL (skipped saying why when
unreachable), each test on its own tables, dropped at the end of the run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _state_urls import IMPLEMENTATIONS, RUN, url_for

PG_URL = os.environ.get("BYREF_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (byref[postgres])")
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable at {PG_URL!r} (set BYREF_TEST_POSTGRES_URL): {exc}")
    yield PG_URL
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
                                     (f"cs_{RUN}%",)).fetchall():
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')


@pytest.fixture(params=IMPLEMENTATIONS)
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url_for(request.param, request, tmp_path)
