"""URLs for each conversation-state implementation (PostgreSQL via the conftest fixture)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

IMPLEMENTATIONS = ["memory", "sqlite", "postgres"]
RUN = secrets.token_hex(4)
"""This run's table prefix (conftest drops its tables at the end)."""


def url_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    base = request.getfixturevalue("postgres_url")
    return f"{base}?table=cs_{RUN}_{secrets.token_hex(4)}"
