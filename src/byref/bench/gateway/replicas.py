"""`byref bench gateway --replicas N`: N gateways behind HAProxy against one, in the same run.

Starts N `byref gateway --transport http` processes with `byref.replicas` on shared PostgreSQL
state (BYREF_BENCH_POSTGRES_URL, default the local test database) and one file store, each with
its own bench upstream (`byref.bench.gateway.upstream`), and one HAProxy (Debian's `haproxy`)
with two frontends: one balancing over all N replicas (round robin, no stickiness), one sending
everything to the first replica alone. Rounds alternate between the two frontends with the same
sessions × calls, so the ratio compares like with like under the same machine load. Then the
first replica's RSS is read before and after a run of large results (placed in the store, which
keeps at most `max_bytes` a scope, evicting the oldest: the disk stays bounded) from a few
sessions at once, with the throughput of that run.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOKEN = "bench-replicas-token-0123456789"
RSS_SESSIONS = 3
"""Concurrent sessions of the large-result run (measured on 2 cores: 1 → 0.18 s a 10 MB call,
3 → 0.13 s, 4 no better)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _replica(config: Path, log: Any) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "byref.cli", "gateway", "--config",
                             str(config), "--transport", "http", "--port", "0"],
                            stdout=log, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", line)
    if not found:
        proc.kill()
        raise RuntimeError(f"a replica did not start: {line}{proc.stderr.read()[:2000]}")
    err = proc.stderr
    threading.Thread(target=lambda: shutil.copyfileobj(err, log), daemon=True).start()
    return proc, int(found.group(1))


def replicas_bench(replicas: int = 3, *, sessions: int = 8, calls: int = 50, rounds: int = 3,
                   rss_calls: int = 5_000, rss_mb: int = 10,
                   log: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """N gateway replicas behind HAProxy on shared PostgreSQL state against one: throughput, p50
    and p95 of concurrent sessions, interleaved over `rounds`, and the first replica's RSS over
    large results. Raises RuntimeError when HAProxy is missing, a replica does not start or a call
    fails."""
    import anyio

    from byref.bench.gateway.rig import stop_processes

    haproxy = shutil.which("haproxy")
    if haproxy is None:
        raise RuntimeError("byref bench gateway --replicas needs HAProxy: apt-get install -y "
                           "haproxy")
    pg = os.environ.get("BYREF_BENCH_POSTGRES_URL", "postgresql://root@127.0.0.1:5432/test")
    table = f"benchrep_{secrets.token_hex(4)}"
    work = Path(tempfile.mkdtemp(prefix="byref-bench-replicas-"))
    config = work / "gateway.json"
    config.write_text(json.dumps({
        "mcpServers": {"bench": {"command": sys.executable,
                                 "args": ["-m", "byref.bench.gateway.upstream"]}},
        "byref": {"tokens": {TOKEN: {"tenant": "bench", "principal": "p"}}, "replicas": True,
                  "state": f"{pg}{'&' if '?' in pg else '?'}table={table}",
                  "store": f"file://{work / 'store'}?max_bytes={rss_store_bytes(rss_mb)}"}}))
    procs: list[subprocess.Popen[str]] = []
    balancer = None
    with (work / "gateways.log").open("a") as out:
        try:
            ports = []
            for i in range(replicas):
                log(f"starting replica {i + 1}/{replicas}")
                proc, port = _replica(config, out)
                procs.append(proc)
                ports.append(port)
            one, every = _free_port(), _free_port()
            servers = "\n".join(f"  server r{i} 127.0.0.1:{p} check inter 500ms"
                                for i, p in enumerate(ports))
            (work / "haproxy.cfg").write_text(
                "defaults\n  mode http\n  timeout connect 2s\n  timeout client 300s\n"
                "  timeout server 300s\n  retries 3\n  option redispatch\n"
                f"frontend every\n  bind 127.0.0.1:{every}\n  default_backend every\n"
                f"frontend one\n  bind 127.0.0.1:{one}\n  default_backend one\n"
                "backend every\n  balance roundrobin\n  option httpchk GET /healthz\n"
                f"{servers}\n"
                f"backend one\n  server r0 127.0.0.1:{ports[0]}\n")
            balancer = subprocess.Popen([haproxy, "-db", "-f", str(work / "haproxy.cfg")],
                                        stdout=subprocess.DEVNULL, stderr=out)
            try:
                report = anyio.run(_measure, ports, one, every, procs[0].pid, sessions, calls,
                                   rounds, rss_calls, rss_mb, log)
            except Exception as exc:  # the gateways' own words go with it (the log is deleted)
                out.flush()
                tail = (work / "gateways.log").read_text(errors="replace")[-4_000:]
                raise RuntimeError(f"the run failed: {exc!r}; the gateways' log ends:\n"
                                   f"{tail}") from exc
        finally:
            if balancer is not None:
                balancer.kill()
                balancer.wait(10)
            stop_processes(procs)
            _drop(pg, table)
            shutil.rmtree(work, ignore_errors=True)
    report.update(replicas=replicas, sessions=sessions, calls=calls, rounds=rounds)
    return report


def _drop(pg: str, table: str) -> None:
    try:
        import psycopg

        with psycopg.connect(pg, autocommit=True) as conn:
            for suffix in ("conversations", "lines", "usage"):
                conn.execute(f'DROP TABLE IF EXISTS "{table}_{suffix}"')
    except Exception:  # clean-up only
        pass


async def _measure(ports: list[int], one: int, every: int, first_pid: int, sessions: int,
                   calls: int, rounds: int, rss_calls: int, rss_mb: int,
                   log: Callable[[str], None]) -> dict[str, Any]:
    import anyio
    import httpx2 as httpx
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from byref.gateway.wire.sdk_client import create_mcp_http_client

    async with httpx.AsyncClient(timeout=10) as http:
        with anyio.fail_after(120):
            while True:
                try:
                    codes = [(await http.get(f"http://127.0.0.1:{p}/readyz")).status_code
                             for p in ports]
                    codes += [(await http.get(f"http://127.0.0.1:{f}/healthz")).status_code
                              for f in (one, every)]
                    if set(codes) == {200}:
                        break
                except httpx.HTTPError:
                    pass
                await anyio.sleep(0.2)

    def client(port: int) -> Client:
        http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        return Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp",
                                             http_client=http_client))

    async def side(port: int) -> tuple[float, list[float]]:
        times: list[float] = []

        async def session() -> None:
            async with client(port) as c:
                for i in range(calls):
                    start = time.perf_counter()
                    got = await c.call_tool("call_tool", {"name": "bench__echo",
                                                          "arguments": {"text": f"hi {i}"}})
                    times.append(time.perf_counter() - start)
                    if got.is_error:
                        raise RuntimeError(f"a bench call failed: {got.content}")

        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(sessions):
                group.start_soon(session)
        return time.perf_counter() - began, times

    await side(every)  # warm-up: every replica starts its upstream and lists it
    await side(one)
    walls: dict[str, list[float]] = {"one": [], "every": []}
    lat: dict[str, list[float]] = {"one": [], "every": []}
    for r in range(rounds):  # interleaved, so both sides see the same machine
        for name, port in (("one", one), ("every", every)):
            log(f"round {r + 1}/{rounds}: {name}")
            wall, times = await side(port)
            walls[name].append(wall)
            lat[name].extend(times)

    def figures(name: str) -> dict[str, float]:
        ordered = sorted(lat[name])
        return {"calls_per_s": sessions * calls / statistics.median(walls[name]),
                "p50_ms": ordered[len(ordered) // 2] * 1e3,
                "p95_ms": ordered[int(len(ordered) * 0.95)] * 1e3}

    out: dict[str, Any] = {"one": figures("one"), "every": figures("every")}
    start_rss = _rss_mib(first_pid)
    size = rss_mb << 20
    made = [0]
    peak = [start_rss]
    warm: list[float] = []

    async def large(share: int) -> None:
        async with client(one) as c:
            for _ in range(share):
                got = await c.call_tool("call_tool", {"name": "bench__text",
                                                      "arguments": {"size": size}})
                if got.is_error:
                    raise RuntimeError(f"a large-result call failed: {got.content}")
                made[0] += 1
                if made[0] % 100 == 0:
                    now = _rss_mib(first_pid)
                    peak[0] = max(peak[0], now)
                    if made[0] == 100:  # warmed up: later growth would be a leak
                        warm.append(now)
                    log(f"large results: {made[0]}/{rss_calls}")

    # A few sessions at once, so the upstream's writing and the gateway's reading overlap (one
    # session leaves a core idle); every call still goes to the first replica alone.
    began = time.perf_counter()
    async with anyio.create_task_group() as group:
        for k in range(RSS_SESSIONS):
            group.start_soon(large, rss_calls // RSS_SESSIONS
                             + (k < rss_calls % RSS_SESSIONS))
    wall = time.perf_counter() - began
    out["rss"] = {"calls": rss_calls, "result_mb": rss_mb, "sessions": RSS_SESSIONS,
                  "start_mib": start_rss, "after_mib": _rss_mib(first_pid),
                  "peak_mib": max(peak[0], _rss_mib(first_pid)),
                  "after_100_mib": warm[0] if warm else None,
                  "store_max_mib": rss_store_bytes(rss_mb) >> 20,
                  "calls_per_s": rss_calls / wall, "mb_per_s": rss_calls * rss_mb / wall,
                  "wall_s": wall}
    return out


def rss_store_bytes(rss_mb: int) -> int:
    """The file store's byte ceiling per scope in the RSS run (its oldest results evicted)."""
    return max(64, 8 * rss_mb) << 20


def format_replicas(report: dict[str, Any]) -> str:
    """The report of `replicas_bench` as the lines the CLI prints."""
    one, every, rss = report["one"], report["every"], report["rss"]
    n = report["replicas"]
    return "\n".join([
        f"{n} replicas behind HAProxy (round robin, PostgreSQL state, file store) against one, "
        f"{report['sessions']} concurrent sessions × {report['calls']} calls, "
        f"{report['rounds']} interleaved rounds:",
        f"  throughput  {every['calls_per_s']:.0f} calls/s vs one replica "
        f"{one['calls_per_s']:.0f} (×{every['calls_per_s'] / one['calls_per_s']:.2f})",
        f"  p50 {every['p50_ms']:.2f} ms vs {one['p50_ms']:.2f} ms "
        f"(×{every['p50_ms'] / one['p50_ms']:.2f}); p95 {every['p95_ms']:.2f} ms vs "
        f"{one['p95_ms']:.2f} ms (×{every['p95_ms'] / one['p95_ms']:.2f})",
        f"  first replica RSS {rss['start_mib']:.1f} MiB at start → {rss['after_mib']:.1f} MiB "
        f"after {rss['calls']:,} calls with {rss['result_mb']} MB results ("
        + (f"{rss['after_100_mib']:.1f} MiB after the first 100, "
           if rss.get("after_100_mib") is not None else "")
        + f"peak {rss['peak_mib']:.1f} MiB; {rss['sessions']} sessions at once, "
        f"{rss['calls_per_s']:.1f} calls/s = {rss['mb_per_s']:.0f} MB/s, {rss['wall_s']:.0f} s)",
        f"  store: file store on disk with retention max_bytes={rss['store_max_mib']} MiB per "
        "scope (a put past it evicts the oldest results, so the disk holds at most that, not "
        f"{rss['calls'] * rss['result_mb'] / 1000:,.1f} GB); state: PostgreSQL",
    ])
