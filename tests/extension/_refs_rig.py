"""What the refs extension's tests start: the gateway over a probe upstream (stdio or HTTP) and
the fixture servers, each as its own process (an HTTP one yielded once it says `listening on`),
or the gateway and the SDK extension's server in this process on a store the test holds."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from _waits import scaled
from byref.extension.protocol import IDENTIFIER
from byref.gateway import Gateway, listen_socket, serve_http
from byref.gateway.config.file import parse_config
from byref.store import ArtifactStore
from byref.store.adapters.memory import MemoryStore

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
    async with await anyio.open_process(list(argv), env={**os.environ, **ENV},
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


def _refs_http() -> Any:
    """`fixtures/_refs_http.py` (the fixtures' tokens and auth), loaded from its file."""
    name = "refs_fixture_http"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, FIXTURES / "_refs_http.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


@asynccontextmanager
async def gateway_http(store: ArtifactStore) -> AsyncIterator[tuple[Gateway, str]]:
    """A gateway in this process over the probe upstream (a process), on `store`, served over
    streamable HTTP on a free loopback port with ALICE's and BOB's tokens; yields it and its
    URL."""
    config = parse_config({"mcpServers": {"probe": {
        "command": sys.executable, "args": [str(FIXTURES / "refs_probe.py")], "env": ENV,
        "timeout": scaled(30)}},
        "byref": {"tokens": {ALICE: {"tenant": "t", "principal": "alice"},
                             BOB: {"tenant": "t", "principal": "bob"}}}}, source="test")
    async with Gateway(config, store=store) as gateway:
        sock = listen_socket("127.0.0.1", 0)
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO(), stop=stop))
            try:
                yield gateway, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            finally:
                stop.set()  # a graceful stop (the caller bounds the whole test)
        sock.close()


@asynccontextmanager
async def sdk_http(store: ArtifactStore) -> AsyncIterator[str]:
    """The SDK extension's server (`refs_server` + the probe tools) in this process on `store`,
    served over streamable HTTP on a free loopback port with ALICE's and BOB's tokens."""
    import uvicorn

    from byref.extension.conformance.probe import add_probe_tools
    from byref.extension.server import refs_server

    server = add_probe_tools(refs_server("refs-sdk", store=store, **_refs_http().auth_options()))
    sock = listen_socket("127.0.0.1", 0)
    web = uvicorn.Server(uvicorn.Config(server.streamable_http_app(json_response=True),
                                        log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: web.serve(sockets=[sock]))
        try:
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        finally:
            web.should_exit = True  # a graceful stop (the caller bounds the whole test)
    sock.close()


def client(url: str, token: str, *, declare: bool = True) -> Client:
    """A client over HTTP with `token`, declaring the extension (or not), handshake era."""
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(
        headers={"Authorization": f"Bearer {token}"})), mode="legacy",
        extensions=[advertise(IDENTIFIER, {})] if declare else None,
        read_timeout_seconds=scaled(60))


async def ask(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A host method's answer (`method` under the extension's identifier unless it has a /)."""
    name = method if method.startswith("files/") else f"{IDENTIFIER}/{method}"
    sent = types.Request[dict[str, Any], str](method=name, params=params)
    return await client.session.send_request(sent, TypeAdapter(dict[str, Any]))


async def refused_as(client: Client, method: str, params: dict[str, Any]) -> str:
    """A host method's refusal as `"<code> <message>"` (fails the test if it was answered)."""
    with pytest.raises(MCPError) as caught:
        await ask(client, method, params)
    return f"{caught.value.error.code} {caught.value.error.message}"


async def get(url: str, token: str) -> tuple[int, bytes]:
    """GET `url` with `token`: status, body."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        answer = await http.get(url)
        return answer.status_code, answer.content


def text(result: Any) -> str:
    """A tool result's text blocks, joined."""
    return "\n".join(b.text for b in result.content if getattr(b, "type", "") == "text")


@asynccontextmanager
async def serving(impl: str, store: MemoryStore) -> AsyncIterator[tuple[str, str, str]]:
    """`gateway_http` or `sdk_http` on `store`: its URL and its probe tools' names."""
    if impl == "gateway":
        async with gateway_http(store) as (_gateway, url):
            yield url, "probe__emit", "probe__digest"
    else:
        async with sdk_http(store) as url:
            yield url, "emit", "digest"
