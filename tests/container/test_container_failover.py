"""Failover in the packaging: three gateway containers of the team image (tests/_podman.py) as
replicas over PostgreSQL (conversation state and artifacts, the postgres store), behind HAProxy
(round robin, `option httpchk GET /readyz`, no stickiness) — compose.yaml's topology driven with
plain `podman run`. To save the minutes another image would cost, PostgreSQL and HAProxy are the
host's (both on 127.0.0.1) and the replicas use the host's network, each on its own loopback
port. 3 clients × 100 calls through HAProxy, alternating: an export minted as a ref, then the
upstream's sha256 of a ref minted earlier (by any client, so on any replica). Half way, one
replica container is killed (SIGKILL). Then: HAProxy's /readyz check marks it DOWN; at most the
call each client had in flight fails, and its next call succeeds; every ref minted (before the
kill or after) still resolves, each to its own bytes (0 refs answering other data); every
artifact is in PostgreSQL (0 lost)."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _container_rig import client, export_text, free_port, wait_ready

import _podman

pytestmark = pytest.mark.anyio

TOKEN = "container-failover-token-0123456"
PG = os.environ.get("BYREF_TEST_POSTGRES_URL", "postgresql://127.0.0.1:5432/test")
CLIENTS, CALLS = 3, 100
KILL_AT = 0.5
SIZES = [33, 40, 47, 54]
"""KiB of each export (each above the gateway's inline limit: a Blob ref)."""


def _pg() -> str:
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (byref[postgres])")
    url = PG if "@" in PG else PG.replace("://", "://postgres@", 1)
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable at {url!r} (set BYREF_TEST_POSTGRES_URL): {exc}")
    return url


def _haproxy(root: Path, ports: list[int]) -> tuple[subprocess.Popen[bytes], int, int]:
    front, stats = free_port(), free_port()
    servers = "\n".join(f"  server g{i} 127.0.0.1:{p} check inter 300ms fall 2 rise 1"
                        for i, p in enumerate(ports))
    cfg = root / "haproxy.cfg"
    cfg.write_text(f"""global
  maxconn 256
defaults
  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
frontend byref
  bind 127.0.0.1:{front}
  default_backend gateways
backend gateways
  balance roundrobin
  option httpchk GET /readyz
{servers}
listen stats
  bind 127.0.0.1:{stats}
  stats enable
  stats uri /stats
""")
    proc = subprocess.Popen([str(shutil.which("haproxy")), "-db", "-f", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, front, stats


async def _states(http: httpx2.AsyncClient, stats: int) -> dict[str, str]:
    """Each backend server's status in HAProxy's stats (UP, DOWN, …)."""
    body = (await http.get(f"http://127.0.0.1:{stats}/stats;csv")).text.lstrip("# ")
    return {row["svname"]: row["status"] for row in csv.DictReader(io.StringIO(body))
            if row["pxname"] == "gateways" and row["svname"].startswith("g")}


async def test_three_replica_containers_survive_one_killed(team_image: str,
                                                          tmp_path: Path) -> None:
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (apt-get install -y haproxy)")
    pg = _pg()
    table = f"ct_{os.getpid()}_{int(time.time()) % 100000}"
    state, store = f"{pg}?table={table}", f"{pg}?table={table}"
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({
        "mcpServers": {"code": {"command": "/opt/byref/bin/python",
                                "args": ["/opt/team/code_server.py"], "share": "all"}},
        "byref": {"tokens": {TOKEN: {"tenant": "acme", "principal": "alice"}},
                  "replicas": True, "state": state, "store": store}}))
    config.chmod(0o644)
    tmp_path.chmod(0o755)
    ports = [free_port() for _ in range(3)]
    names = [f"byref-test-replica-{i}" for i in range(3)]
    haproxy = None
    with contextlib.ExitStack() as stack:
        started = time.monotonic()
        for name, port in zip(names, ports, strict=True):
            stack.enter_context(_podman.container(
                team_image, name, "--network", "host",
                "-v", f"{config}:/etc/byref/gateway.json:ro",
                command=("gateway", "--config", "/etc/byref/gateway.json", "--transport", "http",
                         "--host", "127.0.0.1", "--port", str(port))))
        for name, port in zip(names, ports, strict=True):
            await wait_ready(f"http://127.0.0.1:{port}", started + 90, name)
        print(f"3 replicas: podman run to all ready {time.monotonic() - started:.2f} s")
        try:
            haproxy, front, stats = _haproxy(tmp_path, ports)
            async with httpx2.AsyncClient(timeout=5) as http:
                with anyio.fail_after(30):
                    while True:
                        with contextlib.suppress(httpx2.HTTPError):
                            if set((await _states(http, stats)).values()) == {"UP"}:
                                break
                        await anyio.sleep(0.1)
                load = Load(f"http://127.0.0.1:{front}/mcp", names[0])
                began = time.monotonic()
                await load.run(http, stats)
                took = time.monotonic() - began
                load.check()
                await load.resolve_all(f"http://127.0.0.1:{front}/mcp")
                await anyio.to_thread.run_sync(_all_kept, store, load.minted)
            print(f"failover: {load.done} calls in {took:.1f} s, {len(load.minted)} refs minted "
                  f"({load.before_kill} before the kill), {load.resolved} resolved byte-exact "
                  f"after it, {sum(load.failures.values())} calls failed in flight; DOWN in "
                  f"HAProxy {load.down_after:.2f} s after the kill; 0 lost artifacts")
        finally:
            if haproxy is not None:
                haproxy.kill()
                haproxy.wait(10)
            _drop(pg, table)


class Load:
    """CLIENTS clients of CALLS calls each through HAProxy; one replica killed at KILL_AT."""

    def __init__(self, url: str, victim: str) -> None:
        self.url, self.victim = url, victim
        self.done = 0
        self.minted: dict[str, tuple[dict[str, Any], int]] = {}
        """Blob key → (its ref, the KiB of the export it holds)."""
        self.before_kill = 0
        self.failures: dict[int, int] = {}
        self.outcomes: dict[int, list[bool]] = {}
        self.killed_at: float | None = None
        self.down_after = -1.0
        self.resolved = 0
        self._kill = anyio.Event()

    async def run(self, http: httpx2.AsyncClient, stats: int) -> None:
        with anyio.fail_after(300):
            async with anyio.create_task_group() as group:
                group.start_soon(self._killer, http, stats)
                async with anyio.create_task_group() as clients:
                    for n in range(CLIENTS):
                        clients.start_soon(self.client, n)

    async def _killer(self, http: httpx2.AsyncClient, stats: int) -> None:
        await self._kill.wait()
        self.before_kill = len(self.minted)
        await anyio.to_thread.run_sync(lambda: _podman.podman("kill", "-s", "KILL", self.victim))
        self.killed_at = time.monotonic()
        with anyio.fail_after(15):  # /readyz fails: HAProxy takes the replica out
            while (await _states(http, stats)).get("g0", "").split()[0] != "DOWN":
                await anyio.sleep(0.05)
        self.down_after = time.monotonic() - self.killed_at

    async def client(self, n: int) -> None:
        i = 0
        while i < CALLS:
            try:
                async with client(self.url, TOKEN) as c:
                    while i < CALLS:
                        try:
                            await self._call(c, n, i)
                            self.outcomes.setdefault(n, []).append(True)
                        except Exception as exc:
                            if isinstance(exc, AssertionError):
                                raise
                            self._failed(n)
                        i += 1
                        self._tick()
            except Exception as exc:  # the connection dropped mid-call: connect again
                if isinstance(exc, AssertionError):
                    raise
                self._failed(n)
                i += 1
                self._tick()

    def _failed(self, n: int) -> None:
        self.failures[n] = self.failures.get(n, 0) + 1
        self.outcomes.setdefault(n, []).append(False)

    def _tick(self) -> None:
        self.done += 1
        if self.done >= KILL_AT * CLIENTS * CALLS:
            self._kill.set()

    async def _call(self, c: Any, n: int, i: int) -> None:
        if i % 2 == 0 or not self.minted:
            size = SIZES[(n + i) % len(SIZES)]
            got = await c.call_tool("call_tool", {"name": "code__export",
                                                  "arguments": {"kilobytes": size}})
            assert not got.is_error, got.content
            ref = json.loads(got.content[0].text)["value"]
            self.minted[ref["$ref"]["key"]] = (ref, size)
        else:
            keys = list(self.minted)
            await self._digest(c, *self.minted[keys[(n * 31 + i) % len(keys)]])

    async def _digest(self, c: Any, ref: dict[str, Any], size: int) -> None:
        got = await c.call_tool("call_tool", {"name": "code__digest", "arguments": {"text": ref}})
        assert not got.is_error, got.content
        answer = " ".join(getattr(b, "text", "") for b in got.content)
        found = re.search(r'"sha256":\s*"([0-9a-f]{64})"', answer)
        assert found and found.group(1) == _sha(size), (ref, size, answer)

    def check(self) -> None:
        assert self.killed_at is not None, "the load ended before the kill"
        assert self.down_after >= 0
        for n, outcomes in self.outcomes.items():
            assert len(outcomes) == CALLS, n
            assert self.failures.get(n, 0) <= 1, (n, outcomes)  # the one call in flight
            assert outcomes[-1], n

    async def resolve_all(self, url: str) -> None:
        """Every ref minted, before the kill or after, resolves to its own bytes."""
        with anyio.fail_after(120):
            async with client(url, TOKEN) as c:
                for ref, size in self.minted.values():
                    await self._digest(c, ref, size)
                    self.resolved += 1


_SHAS: dict[int, str] = {}


def _sha(size: int) -> str:
    if size not in _SHAS:
        _SHAS[size] = hashlib.sha256(export_text(size).encode()).hexdigest()
    return _SHAS[size]


def _all_kept(store_url: str, minted: dict[str, tuple[dict[str, Any], int]]) -> None:
    """Every Blob minted is in the PostgreSQL store, whole."""
    from byref.store import Scope, open_store

    store = open_store(store_url)
    try:
        scope = Scope("acme", "alice", "gateway")
        for key, (_, size) in minted.items():
            got = store.get(scope, key)
            assert got is not None, key
            assert hashlib.sha256(got.data).hexdigest() == _sha(size), key
    finally:
        store.close()


def _drop(pg: str, table: str) -> None:
    import psycopg

    conninfo = pg
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for suffix in ("conversations", "lines", "usage", "artifacts", "chunks"):
            conn.execute(f'DROP TABLE IF EXISTS "{table}_{suffix}"')
