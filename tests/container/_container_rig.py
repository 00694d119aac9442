"""Helpers of the container tests: the code fixture's export text, free ports, polling a
gateway's /readyz, an MCP client with a bearer token."""

from __future__ import annotations

import importlib.util
import socket
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import _podman

FIXTURE = Path(__file__).resolve().parents[1] / "gateway" / "fixtures" / "code_server.py"


def export_text(kilobytes: int) -> str:
    spec = importlib.util.spec_from_file_location("code_server_text", FIXTURE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out: str = module.export_text(kilobytes)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_ready(base: str, deadline: float, name: str) -> float:
    """Poll `base`/readyz until 200 (bounded); returns when it answered."""
    async with httpx2.AsyncClient(timeout=2) as http:
        while True:
            try:
                if (await http.get(f"{base}/readyz")).status_code == 200:
                    return time.monotonic()
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} not ready in time: {_podman.logs(name)}")
            await anyio.sleep(0.1)


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))
