"""`byref bench startup`: how soon a freshly started server answers over stdio.

Spawns each side N times, interleaved (each round starts every side once, the order rotating, so
drift on a shared machine hits all alike): `byref gateway` on a one-server config (the bench
upstream, `rig.write_config`), the same with `BYREF_SDK_PATHS_ONLY=1` (no stdio front: every
answer the SDK's, as before `gateway.wire.front`), and the baselines from `bare.py`, a bare
FastMCP server and a bare official-SDK server. Each spawn is sent `initialize` at once, then
`notifications/initialized` and `tools/list`; the wall time from the spawn to each answer and
the server process's own CPU time (user + system, read from /proc at the answer) are kept. Rows
are medians, with each side's ratio to the baselines; the load average is read before and after.
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from byref.bench.gateway.rig import START_TIMEOUT, gateway_command, write_config

BARE = Path(__file__).with_name("bare.py")
SIDES = ("gateway", "gateway, SDK paths only", "fastmcp (bare)", "mcp sdk (bare)")
BASELINES = ("fastmcp (bare)", "mcp sdk (bare)")
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "byref-bench-startup", "version": "1"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _env(**extra: str) -> dict[str, str]:
    keep = ("PYTHONPATH", "HOME", "PATH", "LANG", "TMPDIR")
    return {**{k: v for k, v in os.environ.items() if k in keep}, **extra}


def commands(config: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each side's command and environment."""
    return {
        "gateway": (gateway_command(config), _env()),
        "gateway, SDK paths only": (gateway_command(config), _env(BYREF_SDK_PATHS_ONLY="1")),
        "fastmcp (bare)": ([sys.executable, str(BARE), "fastmcp"], _env()),
        "mcp sdk (bare)": ([sys.executable, str(BARE), "sdk"], _env()),
    }


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds process `pid` has used so far (Linux /proc), else None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Lines:
    """A child's stdout, line by line, every read bounded by a deadline."""

    def __init__(self, fd: int, deadline: float) -> None:
        self._fd, self._deadline, self._buffer = fd, deadline, b""

    def answer(self, rid: int) -> dict[str, Any]:
        """The next message answering request `rid` (notifications before it are skipped)."""
        while True:
            while b"\n" not in self._buffer:
                left = self._deadline - time.monotonic()
                if left <= 0 or not select.select([self._fd], [], [], left)[0]:
                    raise TimeoutError(f"no answer to request {rid} in {START_TIMEOUT:.0f} s")
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the server exited before answering request {rid}")
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == rid:
                if "result" not in message:
                    raise RuntimeError(f"request {rid} was refused: {line[:300]!r}")
                return dict(message)


def spawn_once(command: list[str], env: dict[str, str]) -> dict[str, float | None]:
    """One start of `command`: wall seconds and the process's CPU seconds at its answers to
    `initialize` and to the `tools/list` after it."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        lines = _Lines(proc.stdout.fileno(), time.monotonic() + START_TIMEOUT)
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        lines.answer(1)
        init_wall, init_cpu = time.perf_counter() - start, cpu_seconds(proc.pid)
        proc.stdin.write(json.dumps(INITIALIZED).encode() + b"\n" + json.dumps(LIST).encode()
                         + b"\n")
        proc.stdin.flush()
        lines.answer(2)
        list_wall, list_cpu = time.perf_counter() - start, cpu_seconds(proc.pid)
    finally:
        proc.stdin.close()
        try:
            proc.wait(START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(START_TIMEOUT)
        proc.stdout.close()
    return {"init_wall": init_wall, "init_cpu": init_cpu, "list_wall": list_wall,
            "list_cpu": list_cpu}


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known) * 1e3, 1) if known else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def startup_bench(spawns: int, tick: Callable[[int], None] = lambda _n: None) -> dict[str, Any]:
    """Medians (ms) of every side over `spawns` interleaved starts, and each side's ratios to
    the baselines; the load average before and after."""
    before = os.getloadavg()
    samples: dict[str, list[dict[str, float | None]]] = {name: [] for name in SIDES}
    with tempfile.TemporaryDirectory(prefix="byref-bench-startup-") as tmp:
        sides = commands(write_config(Path(tmp) / "gateway.json"))
        for i in range(spawns):
            shift = i % len(SIDES)
            for name in SIDES[shift:] + SIDES[:shift]:
                samples[name].append(spawn_once(*sides[name]))
            tick(1)
    rows: dict[str, dict[str, Any]] = {}
    for name, runs in samples.items():
        rows[name] = {key: _median([r[key] for r in runs])
                      for key in ("init_wall", "init_cpu", "list_wall", "list_cpu")}
    for r in rows.values():
        for base in BASELINES:
            r[f"init_cpu_vs_{base.split()[0]}"] = _ratio(r["init_cpu"], rows[base]["init_cpu"])
            r[f"init_wall_vs_{base.split()[0]}"] = _ratio(r["init_wall"],
                                                          rows[base]["init_wall"])
    return {"spawns": spawns, "load_before": [round(x, 2) for x in before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
            "sides": rows}


def format_report(report: dict[str, Any]) -> str:
    """The report as the table `byref bench startup` prints."""
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    def x(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    out = [f"start-up over stdio: medians of {report['spawns']} spawns per side, interleaved; "
           f"{report['cpus']} CPUs, load average {' '.join(map(str, report['load_before']))} "
           f"before, {' '.join(map(str, report['load_after']))} after",
           f"{'side':26}{'init wall ms':>13}{'init CPU ms':>12}{'list wall ms':>13}"
           f"{'list CPU ms':>12}{'CPU ×fastmcp':>13}{'CPU ×sdk':>9}{'wall ×fastmcp':>14}"]
    for name, r in report["sides"].items():
        out.append(f"{name:26}{ms(r['init_wall']):>13}{ms(r['init_cpu']):>12}"
                   f"{ms(r['list_wall']):>13}{ms(r['list_cpu']):>12}"
                   f"{x(r['init_cpu_vs_fastmcp']):>13}{x(r['init_cpu_vs_mcp']):>9}"
                   f"{x(r['init_wall_vs_fastmcp']):>14}")
    out.append("init: spawn → the initialize answer; list: → the tools/list answer after it (the "
               "gateway's lists its one upstream); CPU: the server process's own, at the answer")
    return "\n".join(out)
