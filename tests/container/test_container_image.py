"""The image: the repository's Containerfile built on a local Debian base (tests/_podman.py), a
team's second stage FROM it adding an upstream MCP server (tests/gateway/fixtures/code_server.py,
run by the image's own Python), run with its port published on 127.0.0.1 only. A real MCP client
(the SDK's) talks to the gateway in the container over HTTP with a bearer token: a 256 KiB
export comes back as a ref, and that ref given to another tool of the upstream arrives byte-exact
(the upstream's own sha256 of what it received). The image runs as a non-root user with `byref` as
its entrypoint and a HEALTHCHECK on /healthz."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import anyio
import pytest
from _container_rig import client, export_text, free_port, wait_ready

import _podman

pytestmark = pytest.mark.anyio

TOKEN = "container-image-token-0123456789"

KILOBYTES = 256


async def test_image_serves_an_upstream_and_forwards_a_ref_byte_exact(
        team_image: str, tmp_path: Path) -> None:
    inspect = json.loads(_podman.podman("image", "inspect", _podman.IMAGE).stdout)[0]
    config = inspect["Config"]
    assert config["User"] == "10001" and config["Entrypoint"] == ["byref"]
    healthcheck = inspect.get("Healthcheck") or config.get("Healthcheck")  # podman: top level
    assert "/healthz" in " ".join(healthcheck["Test"])
    gateway = tmp_path / "gateway.json"
    gateway.write_text(json.dumps({
        "mcpServers": {"code": {"command": "/opt/byref/bin/python",
                                "args": ["/opt/team/code_server.py"], "share": "all"}},
        "byref": {"tokens": {TOKEN: {"tenant": "acme", "principal": "alice"}}}}))
    gateway.chmod(0o644)
    port = free_port()
    started = time.monotonic()
    with _podman.container(team_image, "byref-test-image", "-p", f"127.0.0.1:{port}:8848",
                           "-v", f"{gateway}:/etc/byref/gateway.json:ro,Z"):
        ready = await wait_ready(f"http://127.0.0.1:{port}", started + 60, "byref-test-image")
        print(f"container start to ready: {ready - started:.2f} s")
        whoami = _podman.podman("exec", "byref-test-image", "id", "-u").stdout.strip()
        assert whoami == "10001"
        want = export_text(KILOBYTES)
        with anyio.fail_after(60):
            async with client(f"http://127.0.0.1:{port}/mcp", TOKEN) as c:
                got = await c.call_tool("call_tool", {"name": "code__export",
                                                      "arguments": {"kilobytes": KILOBYTES}})
                assert not got.is_error, got.content
                shown = got.content[0].text  # type: ignore[union-attr]
                assert len(shown) < 4096, "a 256 KiB result came back inline"
                ref = json.loads(shown)["value"]
                assert "$ref" in ref, shown
                hashed = await c.call_tool("call_tool", {"name": "code__digest",
                                                         "arguments": {"text": ref}})
                assert not hashed.is_error, hashed.content
                answer = " ".join(getattr(b, "text", "") for b in hashed.content)
        found = re.search(r'"sha256":\s*"([0-9a-f]{64})"', answer)
        assert found, answer
        assert found.group(1) == hashlib.sha256(want.encode()).hexdigest()
        size = re.search(r'"bytes":\s*(\d+)', answer)
        assert size and int(size.group(1)) == len(want.encode()), answer
