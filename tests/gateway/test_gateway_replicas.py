"""Replicas: three `byref gateway --transport http` processes behind a real HAProxy (round robin,
no stickiness) sharing PostgreSQL conversation state and moto's S3 artifact store. Sessions of
two tokens call through the balancer, so consecutive requests land on different replicas: refs
minted on one replica resolve on another, a token's refs never resolve for the other; then one
replica is killed with SIGKILL mid-load — at most the calls in flight on it fail, and each
client's next call succeeds."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _gateway_rig import World, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

pytestmark = pytest.mark.anyio

PG_URL = os.environ.get("BYREF_TEST_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
ALICE, BOB = "alice-replica-token-0123456789", "bob-replica-token-0123456789ab"
TOKENS = {ALICE: {"tenant": "acme", "principal": "alice"},
          BOB: {"tenant": "acme", "principal": "bob"}}
READ, WRITE = "filesystem__read_text_file", "filesystem__write_file"
SESSIONS, CALLS = 6, 12


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    pytest.importorskip("obstore", reason="obstore is not installed (byref[s3])")
    boto3 = pytest.importorskip("boto3", reason="boto3 (with moto[server]) is not installed")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(timeout=30)
    host, port = server.get_host_and_port()
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ.setdefault(key, value)
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket="byref-replicas")
    yield endpoint
    server.stop()


@pytest.fixture
def postgres_state() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg", reason="psycopg 3 is not installed (byref[postgres])")
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unreachable at {PG_URL!r} (set BYREF_TEST_POSTGRES_URL): {exc}")
    table = f"rep_{secrets.token_hex(4)}"
    yield f"{PG_URL}?table={table}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for suffix in ("conversations", "lines", "usage"):
            conn.execute(f'DROP TABLE IF EXISTS "{table}_{suffix}"')


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _replica(config: Path, log: Any) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "byref.cli", "gateway", "--config",
                             str(config), "--transport", "http", "--port", "0"],
                            stdout=log, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # bounded: the process prints it first, or exits
    found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
    assert found, line + proc.stderr.read()
    threading.Thread(target=lambda: shutil.copyfileobj(proc.stderr, log),  # type: ignore
                     daemon=True).start()
    return proc, int(found.group(1))


def _haproxy(root: Path, ports: list[int]) -> tuple[subprocess.Popen[bytes], int]:
    front = _free_port()
    servers = "\n".join(f"  server r{i} 127.0.0.1:{p} check inter 200ms fall 1 rise 2"
                        for i, p in enumerate(ports))
    cfg = root / "haproxy.cfg"
    cfg.write_text(f"""global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  retries 3
  option redispatch
frontend gateways
  bind 127.0.0.1:{front}
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /healthz
{servers}
""")
    proc = subprocess.Popen([str(shutil.which("haproxy")), "-db", "-f", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, front


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


async def test_three_replicas_behind_haproxy_share_state(
        world: World, postgres_state: str, s3_endpoint: str) -> None:
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed (apt-get install -y haproxy; scripts/services.sh)")
    servers = world.need("filesystem")
    config = world.root / "replica.json"
    config.write_text(json.dumps({"mcpServers": servers, "byref": {
        "tokens": TOKENS, "replicas": True, "state": postgres_state,
        "store": f"s3://byref-replicas/{secrets.token_hex(4)}?endpoint={s3_endpoint}"}}))
    for n in range(SESSIONS):
        (world.files / f"small{n}.txt").write_text(f"small {n}\n")
        (world.files / f"big{n}.txt").write_text(f"big {n} line\n" * 3_000)
    procs: list[subprocess.Popen[str]] = []
    haproxy = None
    with world.log.open("a") as log:
        try:
            ports = []
            for _ in range(3):
                proc, port = _replica(config, log)
                procs.append(proc)
                ports.append(port)
            haproxy, front = _haproxy(world.root, ports)
            url = f"http://127.0.0.1:{front}/mcp"
            async with httpx2.AsyncClient(timeout=10) as http:
                with anyio.fail_after(30):
                    while True:  # HAProxy up, every replica's health check passed
                        try:
                            codes = [(await http.get(f"http://127.0.0.1:{p}/readyz")
                                      ).status_code for p in ports]
                            codes.append((await http.get(url.replace("/mcp", "/healthz"))
                                          ).status_code)
                            if codes == [200] * 4:
                                break
                        except httpx2.HTTPError:
                            pass
                        await anyio.sleep(0.1)
            await _load(world, url, postgres_state)
            async with httpx2.AsyncClient(timeout=10) as http:  # round robin: every replica
                for port in ports:                               # served calls of the load
                    scraped = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
                    served = sum(float(line.rsplit(" ", 1)[1]) for line in scraped.splitlines()
                                 if line.startswith("byref_gateway_calls_total{"))
                    assert served > 0, port
            await _cross_scope(world, url)
            await _kill_one_mid_load(world, url, postgres_state, procs[0])
        finally:
            if haproxy is not None:
                haproxy.kill()
                haproxy.wait(10)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()


async def _session(world: World, url: str, state: str, token: str, n: int, calls: int,
                   failures: list[str] | None = None) -> int:
    """`calls` calls, alternating a read with a write of the previous read's ref (minted, with
    round robin, on another replica); returns the calls that succeeded."""
    ok = 0
    async with client(url, token) as c:
        ref: dict[str, Any] | None = None
        want = ""
        for i in range(calls):
            try:
                if ref is None:
                    name = f"big{n}.txt" if i % 4 == 0 else f"small{n}.txt"
                    want = (world.files / name).read_text()
                    got = await c.call_tool("call_tool", {"name": READ, "arguments": {
                        "path": str(world.files / name)}})
                    assert not got.is_error, text(got)
                    shown = text(got)
                    ref = json.loads(shown)["value"] if shown != want else {"$ref": {
                        "type": "Message", "seq": _seq_of(state, token, want), "part": 0}}
                else:
                    target = world.files / f"out-{token[:5]}-{n}-{i}.txt"
                    wrote = await c.call_tool("call_tool", {"name": WRITE, "arguments": {
                        "path": str(target), "content": ref}})
                    assert not wrote.is_error, text(wrote)
                    assert target.read_text() == want
                    ref = None
                ok += 1
            except Exception as exc:  # counted, not raised, while a replica is being killed
                if failures is None:
                    raise
                failures.append(f"{type(exc).__name__}: {exc}")
                ref = None
    return ok


def _seq_of(state: str, token: str, value: str) -> int:
    """The seq of a result recorded with `value` in the token's conversation, read from the
    shared PostgreSQL state (as a model reads a seq off the transcript it was shown)."""
    import psycopg

    from byref.store import Scope

    conninfo, table = state.split("?table=")
    key = Scope("acme", TOKENS[token]["principal"], "gateway").key()
    needle = '"type":"tool_result","value":' + json.dumps(value)
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            f"SELECT seq FROM {table}_lines WHERE scope_key = %s AND "
            "position(%s in convert_from(line, 'UTF8')) > 0 ORDER BY seq DESC LIMIT 1",
            (key, needle)).fetchone()
    assert row is not None, value
    return int(row[0])


async def _load(world: World, url: str, state: str) -> None:
    results: list[int] = []

    async def one(token: str, n: int) -> None:
        results.append(await _session(world, url, state, token, n, CALLS))

    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for n in range(SESSIONS):
                group.start_soon(one, ALICE if n % 2 == 0 else BOB, n)
    assert results == [CALLS] * SESSIONS


async def _cross_scope(world: World, url: str) -> None:
    async with client(url, ALICE) as alice, client(url, BOB) as bob:
        got = await alice.call_tool("call_tool", {"name": READ, "arguments": {
            "path": str(world.files / "big0.txt")}})
        blob = json.loads(text(got))["value"]
        stolen = await bob.call_tool("call_tool", {"name": WRITE, "arguments": {
            "path": str(world.files / "stolen.txt"), "content": blob}})
        assert stolen.is_error and not (world.files / "stolen.txt").exists()


async def _kill_one_mid_load(world: World, url: str, state: str,
                             victim: subprocess.Popen[str]) -> None:
    failures: list[str] = []
    done: list[int] = []

    async def one(token: str, n: int) -> None:
        try:
            done.append(await _session(world, url, state, token, n, CALLS, failures))
        except Exception as exc:  # the handshake or the close was in flight on the victim
            failures.append(f"{type(exc).__name__}: {exc}")

    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for n in range(SESSIONS):
                group.start_soon(one, ALICE if n % 2 == 0 else BOB, n)
            await anyio.sleep(0.5)
            victim.kill()  # SIGKILL, mid-load
    assert len(failures) <= SESSIONS, failures  # at most each session's call in flight there
    # Each client's next call succeeds (HAProxy has taken the dead replica out).
    for n in range(SESSIONS):
        assert await _session(world, url, state, ALICE if n % 2 == 0 else BOB, n, 2) == 2
