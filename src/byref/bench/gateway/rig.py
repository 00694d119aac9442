"""The rig under `byref bench gateway`: the bench upstream direct and behind `byref gateway`, over
stdio and streamable HTTP, driven by the official `mcp` client, timed side by side.

Owns starting the processes (each a child of the bench, so its RSS is its own), the clients, and
the arithmetic: interleaved timing (each round runs every side once, the order rotating, so drift
on a shared machine hits all sides alike) and rows of p50/p95 with the ratio to the direct side.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

UPSTREAM = "bench"
TOKEN = "byref-bench-gateway-token-4fZ0cW9pQ1xkT7bN"
START_TIMEOUT = 60.0
_ANNOUNCED = re.compile(rb"listening on (http://\S+)")


def stop_processes(procs: list[subprocess.Popen[str]], wait: float = 20) -> None:
    """Terminate every process, then wait for each; one that outlives `wait` seconds is
    killed (all are asked first, so their shutdowns overlap)."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(wait)


def _env() -> dict[str, str]:
    # What a child needs to import byref from here (an install or the source tree), no more.
    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "PATH")}


def upstream_command(*extra: str) -> list[str]:
    """The command that runs the bench upstream (stdio, or `--http`)."""
    return [sys.executable, "-m", "byref.bench.gateway.upstream", *extra]


def upstream_stdio(label: str | None = None) -> StdioServerParameters:
    """The bench upstream as stdio server parameters (`label` tells its process from the
    others)."""
    command, *args = upstream_command(*(("--label", label) if label else ()))
    return StdioServerParameters(command=command, args=args, env=_env())


def floor_stdio() -> StdioServerParameters:
    """The SDK floor proxy (`floor`: the SDK's server and client, no byref) in front of
    its own bench upstream, as stdio server parameters."""
    return StdioServerParameters(command=sys.executable, args=["-m", "byref.bench.gateway.floor"],
                                 env=_env())


def write_config(path: Path, mode: str | None = None) -> Path:
    """A gateway config with the bench upstream (over stdio) and one bearer token for HTTP;
    `mode` sets byref.mode ('search' when None)."""
    command, *args = upstream_command()
    byref: dict[str, Any] = {"tokens": {TOKEN: {"tenant": "bench", "principal": "bench"}}}
    if mode is not None:
        byref["mode"] = mode
    entry: dict[str, Any] = {"command": command, "args": args}
    if "PYTHONPATH" in os.environ:  # run from a source tree: its upstream, not an install's
        entry["env"] = {"PYTHONPATH": os.environ["PYTHONPATH"]}
    path.write_text(json.dumps({"mcpServers": {UPSTREAM: entry}, "byref": byref}))
    return path


def gateway_command(config: Path, *extra: str) -> list[str]:
    """The command that runs `byref gateway` on `config`."""
    return [sys.executable, "-m", "byref.cli", "gateway", "--config", str(config), *extra]


def gateway_stdio(config: Path, scope: str | None = None) -> StdioServerParameters:
    """`byref gateway` on `config` as stdio server parameters (`scope` labels its process)."""
    command, *args = gateway_command(config, *(("--scope", scope) if scope else ()))
    return StdioServerParameters(command=command, args=args, env=_env())


def stdio_client(params: StdioServerParameters) -> Client:
    """An official mcp client over stdio with no response cache."""
    # No response cache: every tools/list the bench times must reach the server.
    return Client(params, cache=None)


def http_client(url: str, token: str | None = None) -> Client:
    """An official mcp client over streamable HTTP (bearer `token` if given), with no response
    cache."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
    return Client(streamable_http_client(url, http_client=http), cache=None)


@asynccontextmanager
async def announced(command: list[str]) -> AsyncIterator[str]:
    """Run `command` until the block ends; yields the http:// address it prints on stderr."""
    async with await anyio.open_process(command, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        env=_env()) as proc:
        assert proc.stderr is not None
        err = BufferedByteReceiveStream(proc.stderr)
        seen: list[bytes] = []
        try:
            with anyio.fail_after(START_TIMEOUT):
                while (found := _ANNOUNCED.search(seen[-1] if seen else b"")) is None:
                    seen.append(await err.receive_until(b"\n", 1 << 16))
        except (anyio.EndOfStream, anyio.IncompleteRead, TimeoutError):
            proc.kill()
            said = b"\n".join(seen).decode(errors="replace")[-2_000:]
            raise RuntimeError(f"{' '.join(command)!r} did not announce an address: "
                               f"{said!r}") from None
        async with anyio.create_task_group() as group:
            group.start_soon(_drain, err)  # a full stderr pipe would stall the server
            try:
                yield found.group(1).decode()
            finally:
                await _stop(proc)
                group.cancel_scope.cancel()


async def _drain(stream: BufferedByteReceiveStream) -> None:
    try:
        while True:
            await stream.receive()
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


async def _stop(proc: anyio.abc.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
    with anyio.move_on_after(10, shield=True) as waited:
        await proc.wait()
    if waited.cancelled_caught:
        proc.kill()


def child_pid(command: list[str]) -> int | None:
    """The pid of this process's child running `command` (Linux /proc; else None)."""
    wanted = "\0".join(command).encode() + b"\0"
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the name in parentheses may hold spaces
        if ppid == me and cmdline == wanted:
            return int(name)
    return None


def rss_kib(pid: int | None) -> int | None:
    """The resident set size of process `pid` in KiB (from /proc), or None when unknown."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def checked(what: str) -> Callable[[Any], Any]:
    """A result check that raises RuntimeError naming `what` when the tool reported an error."""
    def check(result: Any) -> Any:
        if getattr(result, "is_error", False):
            raise RuntimeError(f"{what!r} failed during the benchmark: {result.content!r}")
        return result
    return check


async def interleaved(sides: dict[str, Callable[[], Awaitable[Any]]],
                      rounds: int, warmup: int = 0,
                      tick: Callable[[float], None] = lambda _n: None,
                      last: dict[str, Any] | None = None) -> dict[str, list[float]]:
    """Seconds per call of each side, `rounds` times after `warmup` untimed rounds; each round
    runs every side once, the order rotating; `tick(1)` after each round. Each side's last
    answer is left in `last`."""
    names = list(sides)
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(warmup + rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            answer = await sides[name]()
            elapsed = time.perf_counter() - start
            if last is not None:
                last[name] = answer
            if i >= warmup:
                out[name].append(elapsed)
        tick(1)
    return out


def pct(samples: list[float], q: float) -> float:
    """The `q` quantile of `samples` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def row(direct: list[float], via: list[float], *, p95: bool = True) -> dict[str, float]:
    """p50 (and p95) of both sides in ms, and the gateway's as a ratio to the direct side's."""
    d50, v50 = statistics.median(direct), statistics.median(via)
    out = {"direct_p50_ms": round(d50 * 1e3, 3), "gateway_p50_ms": round(v50 * 1e3, 3),
           "ratio_p50": round(v50 / d50, 2)}
    if p95:
        d95, v95 = pct(direct, 0.95), pct(via, 0.95)
        out |= {"direct_p95_ms": round(d95 * 1e3, 3), "gateway_p95_ms": round(v95 * 1e3, 3),
                "ratio_p95": round(v95 / d95, 2)}
    return out


class Stage:
    """Sections start their processes together, then take turns at the timed part, and close
    only when every section is done: no section is timed while another starts or stops."""

    def __init__(self, sections: int) -> None:
        self._sections = sections
        self._ready = self._finished = 0
        self._all_ready, self._all_finished = anyio.Event(), anyio.Event()
        self._turn = anyio.Lock()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait until every section is ready, run the body alone, then wait until every section has
        had its turn."""
        self._ready += 1
        if self._ready == self._sections:
            self._all_ready.set()
        await self._all_ready.wait()
        async with self._turn:
            yield
        self._finished += 1
        if self._finished == self._sections:
            self._all_finished.set()
        await self._all_finished.wait()
