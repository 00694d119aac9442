"""Helpers for the gateway tests (imported as `_gateway_rig`; fixtures live in conftest.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from _waits import scaled
from byref.gateway import Gateway, build_server, listen_socket, serve_http
from byref.gateway.config.file import parse_config
from byref.gateway.config.servers import ServerConfig
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

    def fixture(self, script: str, timeout: float | None = None, **extra: Any) -> dict[str, Any]:
        """A fixture script's config entry. Its `timeout` bounds the handshake and each call:
        `scaled(5)` unless the test names one (a fixture imports the MCP SDK, seconds of CPU on
        a loaded machine, so a fixed 5 s failed handshakes under load; `_waits`)."""
        return {"command": sys.executable, "args": [str(FIXTURES / script)],
                "timeout": scaled(5) if timeout is None else timeout, **extra}


@asynccontextmanager
async def running(world: World, servers: dict[str, dict[str, Any]],
                  **options: Any) -> AsyncIterator[tuple[Gateway, GatewayServer]]:
    """A gateway over `servers`, its upstreams' stderr in `world.log`."""
    config = parse_config({"mcpServers": servers, "byref": options}, source="test")
    with world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway:
            gateway.list_grace = scaled(gateway.list_grace)  # a call waits for a server starting
            yield gateway, build_server(gateway)


def fixture_server(script: str) -> Any:
    """The MCP server object (`server`) a fixture script defines, loaded in this process: the
    same code `world.fixture(script)` runs as a process."""
    name = f"gateway_fixture_{Path(script).stem}"
    if name not in sys.modules:  # registered first: pydantic resolves its annotations there
        spec = importlib.util.spec_from_file_location(name, FIXTURES / script)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name].server


@asynccontextmanager
async def in_process(servers: dict[str, Any], *, timeout: float = scaled(30),
                     **options: Any) -> AsyncIterator[tuple[Gateway, GatewayServer]]:
    """A gateway over MCP servers in this process (name → the SDK's `Server` or `MCPServer`,
    reached over its in-memory transport): no process and no port, so a test that needs only
    these is in the fast tier. What a server's process or pipes do is tested with `running`."""
    config = parse_config({"mcpServers": {n: {"url": "http://in-process.invalid/"}
                                          for n in servers}, "byref": options}, source="test")
    config = dataclasses.replace(config, servers=tuple(
        ServerConfig(name, server=server, timeout=timeout) for name, server in servers.items()))
    async with Gateway(config) as gateway:
        gateway.list_grace = scaled(gateway.list_grace)
        yield gateway, build_server(gateway)


OVER = ["memory", pytest.param("stdio", marks=pytest.mark.upstreams)]
"""`@pytest.mark.parametrize("over", OVER)`: a case run in this process and over the fixture's own
process too (byref's raw call path on its pipes)."""


@asynccontextmanager
async def fixtures_gateway(request: pytest.FixtureRequest | None, scripts: dict[str, str],
                           *, timeout: float = scaled(30),
                           **options: Any) -> AsyncIterator[tuple[Gateway, GatewayServer]]:
    """A gateway over fixture servers (name → script): in this process (`in_process`), or each
    as its own process when the test's `over` parameter is "stdio" (`OVER`)."""
    params = getattr(getattr(request, "node", None), "callspec", None)
    if params is not None and params.params.get("over") == "stdio":
        assert request is not None
        world: World = request.getfixturevalue("world")
        entries = {name: world.fixture(script, timeout) for name, script in scripts.items()}
        async with running(world, entries, **options) as pair:
            yield pair
    else:
        servers = {name: fixture_server(script) for name, script in scripts.items()}
        async with in_process(servers, timeout=timeout, **options) as pair:
            yield pair


@asynccontextmanager
async def served(world: World, servers: dict[str, dict[str, Any]], *, path: str = "/mcp",
                 **options: Any) -> AsyncIterator[tuple[Gateway, str]]:
    """`running`, served over streamable HTTP on a free loopback port; yields the gateway and
    the URL of `path` (`""`: the server's root, where the ops routes live)."""
    async with running(world, servers, **options) as (gateway, _server):
        sock = listen_socket("127.0.0.1", 0)
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
            try:
                yield gateway, f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
            finally:
                group.cancel_scope.cancel()
        sock.close()


async def announced_url(stderr: Any) -> str:
    """The URL a process says it is `listening on` in its stderr (read up to that line's end;
    the caller bounds the wait)."""
    said = b""
    while b"listening on " not in said or not said.endswith(b"\n"):
        said += await stderr.receive()
    return str(said.decode().split("listening on ", 1)[1].split()[0])


def text(result: Any) -> str:
    """The text of a one-block CallToolResult (the gateway answers with that block, then, for
    an inline result, its ref line as a text block of its own)."""
    blocks = list(result.content)
    if len(blocks) == 2 and ref_line_of(result) is not None:
        blocks = blocks[:1]
    assert len(blocks) == 1, result.content
    out: str = blocks[0].text
    return out


def text_blocks(result: Any) -> list[str]:
    """Every text block of a CallToolResult, in order (a result's own blocks and its ref line)."""
    return [b.text for b in result.content if getattr(b, "type", None) == "text"]


def ref_line_of(result: Any) -> dict[str, Any] | None:
    """The `$ref` of a CallToolResult's ref line (its last block), or None without one."""
    from byref.dispatch.outbound.reflines import copied, split

    last = result.content[-1] if result.content else None
    if getattr(last, "type", None) != "text":
        return None
    body, line = split("\n" + last.text)
    if body or line is None:
        return None
    return copied(line)
