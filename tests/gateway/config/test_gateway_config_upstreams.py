"""Config users already have, end to end: a disabled server is never started, a server's `tools`
globs decide what the catalog holds, `${VAR}` reaches the started server, a legacy SSE upstream
is served, and a VS Code `servers` file runs as it is."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from _gateway_rig import FIXTURES, World
from mcp import Client

from _waits import scaled
from byref.gateway import Gateway, build_server
from byref.gateway.config.file import load_config, parse_config

pytestmark = pytest.mark.anyio


def _media(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURES / "media_server.py")],
            "timeout": scaled(30), **extra}


async def test_disabled_servers_are_not_started_and_tool_globs_filter_the_catalog(
        world: World) -> None:
    marker = world.root / "started"
    config = parse_config({"mcpServers": {
        "media": _media(tools={"allow": ["screenshot", "p*", "erase"], "deny": ["erase"]}),
        "off": {"command": sys.executable, "disabled": True,
                "args": ["-c", f"open({str(marker)!r}, 'w')"]}}}, source="test")
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway, Client(
                build_server(gateway)) as client:
            box = await gateway.toolbox()
            proxied = sorted(e.name for e in box.catalog if e.server is not None)
            assert proxied == ["media__peek", "media__screenshot"]
            assert list(gateway.upstreams.upstreams) == ["media"]
            denied = await client.call_tool("call_tool", {"name": "media__erase"})
            assert denied.is_error
    assert not marker.exists()


async def test_variables_reach_the_started_server(world: World,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = world.root / "env.json"
    monkeypatch.setenv("BYREF_TEST_SECRET", "s3cret")
    script = ("import json, os, sys; json.dump({'arg': sys.argv[1], 'env': os.environ['KEY']}, "
              f"open({str(out)!r}, 'w')); sys.exit(1)")
    config = parse_config({"mcpServers": {"probe": {
        "command": "${BYREF_TEST_PY:-" + sys.executable + "}",
        "args": ["-c", script, "${BYREF_TEST_SECRET}"],
        "env": {"KEY": "k-${BYREF_TEST_SECRET}"}, "timeout": scaled(10)}}}, source="test")
    with anyio.fail_after(scaled(30)), world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway:
            box = await gateway.toolbox()
            assert box.unavailable["probe"] == "Server 'probe' exited with code 1."
    assert json.loads(out.read_text()) == {"arg": "s3cret", "env": "k-s3cret"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def sse_server(world: World) -> Iterator[str]:
    port = _free_port()
    with world.log.open("a") as errlog:
        proc = subprocess.Popen([sys.executable, str(FIXTURES / "media_server.py"), "--sse",
                                 str(port)], stdout=errlog, stderr=errlog)
    try:
        started = time.monotonic()
        while time.monotonic() - started < 30:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the SSE fixture server did not start listening within 30 s")
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(10))


async def test_a_legacy_sse_upstream_is_served(world: World, sse_server: str) -> None:
    path = world.root / "mcp.json"  # VS Code's shape, as that editor writes it
    path.write_text(json.dumps({"inputs": [], "servers": {
        "media": {"type": "sse", "url": sse_server}}}))
    config = load_config(path)
    with anyio.fail_after(scaled(60)), world.log.open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway, Client(
                build_server(gateway)) as client:
            peek = await client.call_tool("call_tool", {"name": "media__peek"})
            assert not peek.is_error, peek.content
            assert peek.content[0].text == "3 records"  # type: ignore[union-attr]
