"""The lens opens any conversation a store holds (issue 25.9): `byref lens <gateway store>`
lists them (it said "has no transcript.jsonl"), `--conversation ID` opens one, and the pages
are those of a run directory — calls, refs, artifacts — read from the gateway's state and
store, without writing either."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import re
import select
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from _lens_rig import BYREF
from test_lens_gateway import big_repo

from _waits import scaled

pytestmark = pytest.mark.anyio
CONV = "lens-conv"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def lens(*args: str) -> Iterator[str]:
    proc = subprocess.Popen([*BYREF, "lens", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("byref lens: http://127.0.0.1:"), (line, proc.stderr)
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=scaled(30))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=scaled(60)) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def digest(root: Path) -> str:
    """What a store directory holds: its files' bytes, and a SQLite file's rows (opening it
    may checkpoint a write-ahead log the writer left, which moves bytes but changes no row)."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm")):
            continue
        if path.suffix == ".db":
            with contextlib.closing(sqlite3.connect(path)) as conn:
                h.update(str(path).encode() + "\n".join(conn.iterdump()).encode())
        else:
            h.update(str(path).encode() + path.read_bytes())
    return h.hexdigest()


async def test_byref_lens_opens_the_conversations_a_gateway_store_holds(tmp_path: Path) -> None:
    from mcp import Client

    from byref.bench.gateway.run import _program
    from byref.gateway import Gateway, build_server
    from byref.gateway.config.file import parse_config

    git = _program("mcp-server-git")
    if not git:
        pytest.skip("mcp-server-git is not installed (pip install -e '.[gateway-test]')")
    repo = big_repo(tmp_path / "repo")
    store = tmp_path / "store"
    config = dataclasses.replace(parse_config({"mcpServers": {"git": {"command": git, "args": [
        "--repository", str(repo)]}}, "byref": {"store": f"file://{store}"}}, source="test"),
        stdio_conversation=CONV)
    with anyio.fail_after(scaled(120)):
        async with Gateway(config, errlog=io.StringIO()) as gateway, Client(
                build_server(gateway)) as client:
            shown = await client.call_tool("call_tool", {
                "name": "git__git_show", "arguments": {"repo_path": str(repo),
                                                       "revision": "HEAD"}})
            assert not shown.is_error
    before = digest(store)

    def look() -> None:
        with lens(str(store)) as url:  # the gateway's store directory, as the issue ran it
            status, index = get(url)
            assert status == 200 and CONV in index
            [page] = re.findall(rf'href="(/c/[^"]+/{CONV}/)"', index)
            status, body = get(url.rstrip("/") + page)
            assert status == 200 and "git__git_show" in body and "Tool calls (1)" in body
            assert "has no event trace" in body  # said, not left blank
            [key] = sorted(set(re.findall(r'data-ref="(art_\w{22})"', body)))
            status, art = get(f"{url.rstrip('/')}{page}artifact/{key}")
            assert status == 200 and "alice&#x27;s private line" in art
        with lens("--store", f"file://{store}", "--conversation", CONV) as url:
            status, body = get(url)
            assert status == 200 and "git__git_show" in body
        done = subprocess.run([*BYREF, "lens", "--store", f"file://{store}", "--conversation",
                               "nope"], capture_output=True, text=True, timeout=scaled(60))
        assert done.returncode == 2
        assert "holds no live conversation 'nope'" in done.stderr and CONV in done.stderr

    await anyio.to_thread.run_sync(look)
    await gateway_lens_shows_kept(store)
    assert digest(store) == before  # read-only: the state and the store are as they were


async def gateway_lens_shows_kept(store: Path) -> None:
    """The gateway's /lens app lists a caller's kept conversations, not only open ones: here no
    conversation is open (`states` is empty) and the stdio caller's is listed from the state.
    The verified token's claims are put in the request as the SDK's bearer middleware does."""
    from types import SimpleNamespace

    import httpx

    from byref.conversations import open_state
    from byref.lens.serving.gateway import lens_app
    from byref.store import FileStore

    state = open_state(f"sqlite:///{store / 'state.db'}", ttl=None)
    app = lens_app(lambda: [], FileStore(store), kept=lambda: state)

    def as_caller(tenant: str, principal: str) -> object:
        async def asgi(scope: dict[str, object], receive: object, send: object) -> None:
            claims = {"tenant": tenant, "principal": principal}
            await app({**scope, "user": SimpleNamespace(
                access_token=SimpleNamespace(claims=claims))}, receive, send)
        return asgi

    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=as_caller(
                "local", "stdio")), base_url="http://127.0.0.1") as http:
            index = await http.get("/lens/")
            assert index.status_code == 200 and f'href="/lens/c/{CONV}/"' in index.text
            page = await http.get(f"/lens/c/{CONV}/")
            assert page.status_code == 200 and "git__git_show" in page.text
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=as_caller(
                "local", "mallory")), base_url="http://127.0.0.1") as http:
            assert "has no conversation yet" in (await http.get("/lens/")).text
            assert (await http.get(f"/lens/c/{CONV}/")).status_code == 404
    finally:
        state.close()

