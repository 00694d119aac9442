"""`byref bench gateway-code`: code mode at the gateway, against the same calls made one by one.

An in-process gateway over the bench upstream (stdio), `byref.codeMode: all` (its warm sandbox
ready before each timed run), driven by the official MCP client in memory. Measured in one run:
N echo calls made by the client through call_tool (one model turn each) against one run_code
whose program makes the same N calls — wall time per call and the characters the client
receives on each side; and a 10 MiB upstream text passed from one inner call to the next by
handle, with the sandboxed program's own peak RSS before and after (and after reading it whole,
the control).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import anyio

PASS_BYTES = 10 << 20
_PASS = """
import json, resource
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
big = tools.bench__text(size=%d)
back = tools.bench__echo(text=big)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
whole = len(back.read())
print(json.dumps({"base": base, "peak": peak, "read": whole,
                  "after_read": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def bench_gateway_code(calls: int = 100, rounds: int = 3) -> dict[str, Any]:
    """The figures as one report (raises RuntimeError where no sandbox can be made)."""
    from byref.tools.run_python.sandbox import Sandbox

    reason = Sandbox().unavailable()
    if reason is not None:
        raise RuntimeError(f"code mode needs a sandbox, and none can be made here: {reason}")
    report: dict[str, Any] = anyio.run(_measure, calls, rounds)
    return report


async def _measure(calls: int, rounds: int) -> dict[str, Any]:
    from mcp import Client

    from byref.gateway import Gateway, build_server
    from byref.gateway.config.file import parse_config

    config = parse_config({"mcpServers": {"bench": {
        "command": sys.executable, "args": ["-m", "byref.bench.gateway.upstream"],
        "timeout": 120}}, "byref": {"codeMode": "all"}}, source="bench")
    loop = f"for i in range({calls}):\n    tools.bench__echo(text='x')\nprint({calls})\n"
    one: list[float] = []
    code: list[float] = []
    empty: list[float] = []
    one_chars = code_chars = 0
    async with Gateway(config) as gateway, Client(build_server(gateway)) as client:
        await gateway.toolbox()
        await _call(client, "bench__echo", {"text": "warm"})
        for _ in range(rounds):
            started, one_chars = time.perf_counter(), 0
            for _ in range(calls):
                one_chars += await _call(client, "bench__echo", {"text": "x"})
            one.append((time.perf_counter() - started) / calls)
            await _warm(gateway)
            started = time.perf_counter()
            await _call(client, "run_code", {"code": "print(0)"})
            empty.append(time.perf_counter() - started)
            await _warm(gateway)
            started = time.perf_counter()
            code_chars = await _call(client, "run_code", {"code": loop})
            code.append(time.perf_counter() - started)
        passed = await _run(client, _PASS % PASS_BYTES)
    seen = json.loads(passed.split("\n", 1)[1])
    return {
        "calls": calls, "rounds": rounds,
        "one_by_one_us": statistics.median(one) * 1e6, "one_by_one_chars": one_chars,
        "run_code_us": statistics.median(code) * 1e6,
        "empty_run_us": statistics.median(empty) * 1e6,
        "inner_us": max(0.0, statistics.median(code) - statistics.median(empty)) / calls * 1e6,
        "from_code_chars": code_chars,
        "pass_bytes": PASS_BYTES, "read_bytes": seen["read"],
        "child_kib": {"baseline": seen["base"], "after_pass": seen["peak"],
                      "after_reading_whole": seen["after_read"]},
    }


async def _warm(gateway: Any) -> None:
    """Wait, untimed, until the gateway's warm sandbox is ready (as a model's turn gives it
    time to), so both runs start alike and their difference is the calls'."""
    pool = getattr(gateway.code_runner, "pool", None)
    if pool is not None:
        await anyio.to_thread.run_sync(lambda: pool.wait_for(lambda: pool.ready() >= 1, 120))


async def _call(client: Any, name: str, args: dict[str, Any]) -> int:
    result = await client.call_tool("call_tool", {"name": name, "arguments": args})
    texts = [getattr(b, "text", "") for b in result.content]
    if result.is_error:
        raise RuntimeError(f"{name} was refused: {' '.join(texts)[:500]}")
    return sum(len(t) for t in texts)


async def _run(client: Any, code: str) -> str:
    result = await client.call_tool("call_tool", {"name": "run_code",
                                                  "arguments": {"code": code}})
    text: str = result.content[0].text
    if result.is_error:
        raise RuntimeError(f"run_code was refused: {text[:1000]}")
    return text


def format_report(report: dict[str, Any]) -> str:
    """The figures as the CLI prints them."""
    n, kib = report["calls"], report["child_kib"]
    return "\n".join([
        f"{n} upstream calls (bench__echo), median of {report['rounds']} rounds:",
        f"  one by one (call_tool): {report['one_by_one_us']:>9,.0f} us a call, "
        f"{report['one_by_one_chars']:>8,} characters to the client in {n} turns",
        f"  one run_code          : {report['inner_us']:>9,.0f} us a call, "
        f"{report['from_code_chars']:>8,} characters to the client in 1 turn "
        f"(the run {report['run_code_us'] / 1e3:,.0f} ms, of which "
        f"{report['empty_run_us'] / 1e3:,.0f} ms an empty program's)",
        f"  ratio                 : {report['one_by_one_us'] / max(report['inner_us'], 1):.2f}x "
        f"faster a call from code, {report['one_by_one_chars'] / report['from_code_chars']:.1f}x "
        "fewer characters",
        f"{report['pass_bytes'] >> 20} MiB passed between two inner calls by handle: child "
        f"peak RSS {kib['baseline']:,} KiB -> {kib['after_pass']:,} KiB "
        f"(+{kib['after_pass'] - kib['baseline']:,}); reading it whole (control) "
        f"{kib['after_reading_whole']:,} KiB",
    ])
