"""Helpers for the gateway tests (imported as `_gateway_rig`; fixtures live in conftest.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from byref.gateway import Gateway, build_server
from byref.gateway.config.file import parse_config
from byref.gateway.edge.server import GatewayServer

FIXTURES = Path(__file__).parent / "fixtures"
PG_URL = os.environ.get("BYREF_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
"""The PostgreSQL the state tests use (trust auth); unreachable, they skip saying so."""


@dataclass
class World:
    root: Path
    repo: Path
    files: Path
    db: Path
    servers: dict[str, dict[str, Any]]
    missing: dict[str, str]
    log: Path

    def need(self, *names: str) -> dict[str, dict[str, Any]]:
        """The named reference servers' config entries; skips, saying why, if one is missing."""
        for name in names:
            if name in self.missing:
                pytest.skip(f"reference server {name!r} unavailable: {self.missing[name]}")
        return {n: self.servers[n] for n in names}

    def fixture(self, script: str, timeout: float = 5, **extra: Any) -> dict[str, Any]:
        return {"command": sys.executable, "args": [str(FIXTURES / script)],
                "timeout": timeout, **extra}


@asynccontextmanager
async def running(world: World, servers: dict[str, dict[str, Any]],
                  **options: Any) -> AsyncIterator[tuple[Gateway, GatewayServer]]:
    """A gateway over `servers`, its upstreams' stderr in `world.log`."""
    config = parse_config({"mcpServers": servers, "byref": options}, source="test")
    with world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway:
            yield gateway, build_server(gateway)


def text(result: Any) -> str:
    """The text of a CallToolResult (the gateway always answers with one text block)."""
    assert len(result.content) == 1, result.content
    out: str = result.content[0].text
    return out
