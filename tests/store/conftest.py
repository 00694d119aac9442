"""Fixtures for the store tests: a real PostgreSQL (skipped with a reason when unreachable) and a
real S3 API (moto's server on a free loopback port), each test on its own table / bucket prefix."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _s3 import moto_s3

PG_URL = os.environ.get("BYREF_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
BUCKET = "byref-tests"
ADAPTERS = ["memory", "file", "sqlite", "postgres", "s3"]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable at {PG_URL!r} (set BYREF_TEST_POSTGRES_URL): {exc}")
    tables: list[str] = []
    yield PG_URL
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE %s", (f"bt_{_RUN}%",)
        ).fetchall():
            tables.append(row[0])
        for table in tables:
            conn.execute(f'DROP TABLE IF EXISTS "{table}"')


_RUN = secrets.token_hex(4)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with moto_s3(BUCKET) as endpoint:
        yield endpoint


def url_for(adapter: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    token = secrets.token_hex(4)
    if adapter == "memory":
        return "memory://"
    if adapter == "file":
        return f"file://{tmp_path / 'files'}"
    if adapter == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if adapter == "postgres":
        base = request.getfixturevalue("postgres_url")
        return f"{base}?table=bt_{_RUN}_{token}"
    base = request.getfixturevalue("s3_endpoint")
    return f"s3://{BUCKET}/run-{_RUN}-{token}?endpoint={base}"


@pytest.fixture
def make_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """A fresh URL for the named adapter (its own table / prefix / directory)."""
    return lambda adapter: url_for(adapter, request, tmp_path)


@pytest.fixture(params=ADAPTERS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return url_for(request.param, request, tmp_path)
