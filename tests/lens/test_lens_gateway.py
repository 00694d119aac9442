"""`byref gateway --transport http` serves the lens at /lens: each token sees its own runs only.

A real gateway (the HTTP server `byref gateway` runs) over the real mcp-server-git; Alice's large
`git_show` result is stored, and over HTTP Bob's token finds neither her conversation nor her
artifact: it answers as absent, as a ref that never existed.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from _waits import scaled

pytestmark = pytest.mark.anyio

ALICE = "alice-lens-token-0123456789abcdef"
BOB = "bob-lens-token-0123456789abcdef00"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"}}



def big_repo(path: Path) -> Path:
    env = {**os.environ, "GIT_AUTHOR_NAME": "byref", "GIT_AUTHOR_EMAIL": "byref@example.com",
           "GIT_COMMITTER_NAME": "byref", "GIT_COMMITTER_EMAIL": "byref@example.com"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    (path / "ledger.txt").write_text("".join(f"entry {i}: alice's private line\n"
                                             for i in range(3_000)))
    subprocess.run(["git", "-C", str(path), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "ledger"], check=True, env=env)
    return path


def get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=scaled(60)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_a_token_sees_only_its_own_runs_and_artifacts(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from byref.bench.gateway.run import _program
    from byref.gateway import Gateway, listen_socket, serve_http
    from byref.gateway.config.file import parse_config

    git = _program("mcp-server-git")
    if not git:
        pytest.skip("mcp-server-git is not installed (pip install -e '.[gateway-test]')")
    repo = big_repo(tmp_path / "repo")
    config = parse_config({"mcpServers": {"git": {"command": git, "args": [
        "--repository", str(repo)]}}, "byref": {"tokens": TOKENS,
                                                "store": f"file://{tmp_path / 'store'}"}},
                          source="test")

    def client(url: str, token: str) -> Client:
        return Client(streamable_http_client(url, http_client=create_mcp_http_client(
            headers={"Authorization": f"Bearer {token}"})))

    with anyio.fail_after(scaled(120)), (tmp_path / "upstreams.log").open("a") as errlog:
        async with Gateway(config, errlog=errlog) as gateway:
            sock = listen_socket("127.0.0.1", 0)
            base = f"http://127.0.0.1:{sock.getsockname()[1]}"
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: serve_http(gateway, sock, announce=io.StringIO()))
                async with client(f"{base}/mcp", ALICE) as alice, client(
                        f"{base}/mcp", BOB) as bob:
                    shown = await alice.call_tool("call_tool", {
                        "name": "git__git_show",
                        "arguments": {"repo_path": str(repo), "revision": "HEAD"}})
                    assert not shown.is_error
                    await bob.call_tool("call_tool", {
                        "name": "git__git_status", "arguments": {"repo_path": str(repo)}})

                    def look() -> dict[str, Any]:
                        seen: dict[str, Any] = {"anonymous": get(f"{base}/lens/", None)}
                        for who, token in (("alice", ALICE), ("bob", BOB)):
                            status, index = get(f"{base}/lens/", token)
                            convs = re.findall(r'href="(/lens/c/[^"]+/)"', index)
                            pages = [get(f"{base}{c}", token) for c in convs]
                            seen[who] = {"index": (status, index), "pages": pages,
                                         "convs": convs}
                        return seen

                    seen = await anyio.to_thread.run_sync(look)
                    assert seen["anonymous"][0] == 401
                    alice_pages = [body for status, body in seen["alice"]["pages"]
                                   if status == 200]
                    bob_pages = [body for status, body in seen["bob"]["pages"]
                                 if status == 200]
                    assert alice_pages and bob_pages
                    mine = "".join(alice_pages)
                    assert "git__git_show" in mine and "git__git_show" not in "".join(bob_pages)
                    keys = sorted(set(re.findall(r'data-ref="(art_\w{22})"', mine)))
                    assert keys, "Alice's large result was stored and is linked"
                    conv = seen["alice"]["convs"][0]

                    def artifact(token: str, c: str) -> tuple[int, str]:
                        return get(f"{base}{c}artifact/{keys[0]}", token)

                    status, page = await anyio.to_thread.run_sync(artifact, ALICE, conv)
                    assert status == 200 and "alice&#x27;s private line" in page
                    for c in [*seen["bob"]["convs"], conv]:  # Bob's runs, and Alice's URL
                        status, page = await anyio.to_thread.run_sync(artifact, BOB, c)
                        assert status == 404 and "private line" not in page
                    # The same URL under Bob's token is Bob's own conversation of that name
                    # (URLs are relative to the caller), never Alice's.
                    status, page = await anyio.to_thread.run_sync(get, f"{base}{conv}", BOB)
                    assert "git__git_show" not in page and keys[0] not in page
                    status, _ = await anyio.to_thread.run_sync(
                        get, f"{base}/lens/c/no-such-conversation/", ALICE)
                    assert status == 404
                group.cancel_scope.cancel()
            sock.close()

