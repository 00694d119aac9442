"""`byref bench code-start`: what a run_code costs at the gateway, cold and warm, against FastMCP's
CodeMode (pydantic-monty) in the same run.

Four servers, each driven by an MCP client in memory, three of them over one upstream command
(the bench upstream, stdio): a byref gateway whose run_code starts a sandbox per call (cold: no
warm pool, as before warm sandboxes), one that keeps a warm sandbox (`byref.codeRuns.warm: 1`;
before each timed run the bench waits, untimed, until one is ready, as a model's turn gives it
time to), FastMCP 4's `CodeMode` over a FastMCP proxy of the same upstream, and (the strictest
baseline) FastMCP's `CodeMode` over an echo tool of its own, in process. Rounds are
interleaved. Printed: an empty program's p50 and p90 on each, then the p50 end to end for 0, 1,
3 and 10 inner echo calls on each, and where warm byref draws level with each FastMCP (measured,
and from each side's fitted start + per-call cost).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

CALLS = (0, 1, 3, 10)
_READY_WAIT = 120.0


def bench_code_start(rounds: int = 20, calls: tuple[int, ...] = CALLS) -> dict[str, Any]:
    """The figures as one report (raises RuntimeError where no sandbox can be made or FastMCP's
    CodeMode cannot run)."""
    from byref.tools.run_python.sandbox import Sandbox

    reason = Sandbox().unavailable()
    if reason is not None:
        raise RuntimeError(f"code mode needs a sandbox, and none can be made here: {reason}")
    report: dict[str, Any] = anyio.run(_measure, rounds, calls)
    return report


def _upstream() -> list[str]:
    return [sys.executable, "-m", "byref.bench.gateway.upstream"]


def _program(n: int) -> str:
    return "".join("tools.bench__echo(text='x')\n" for _ in range(n)) + f"print({n})\n"


def _monty_program(n: int) -> str:
    return "".join("await call_tool('echo', {'text': 'x'})\n" for _ in range(n)) + f"return {n}\n"


async def _measure(rounds: int, calls: tuple[int, ...]) -> dict[str, Any]:
    from mcp import Client

    from byref.gateway import Gateway, build_server
    from byref.gateway.config.file import parse_config

    def config(warm: bool) -> Any:
        runs = {"codeRuns": {"warm": 1}} if warm else {}
        return parse_config({"mcpServers": {"bench": {
            "command": _upstream()[0], "args": _upstream()[1:], "timeout": 120}},
            "byref": {"codeMode": "all", **runs}}, source="bench")

    sizes = tuple(dict.fromkeys((0, *calls)))
    cold_gw = Gateway(config(False))
    # No runner of the gateway's: each run_code tool starts a sandbox per call, as before.
    cold_gw.code_runner = None
    warm_gw = Gateway(config(True))
    times: dict[str, dict[int, list[float]]] = {
        way: {n: [] for n in sizes} for way in ("cold", "warm", "fastmcp", "fastmcp_local")}
    async with cold_gw, warm_gw, Client(build_server(cold_gw)) as cold, \
            Client(build_server(warm_gw)) as warm, _fastmcp(proxy=True) as monty, \
            _fastmcp(proxy=False) as local:
        for gateway, client in ((cold_gw, cold), (warm_gw, warm)):
            await gateway.toolbox()
            await _run_code(client, _program(1))  # the upstream up, every path warmed once
        await _execute(monty, _monty_program(1))
        await _execute(local, _monty_program(1))
        runner = warm_gw.code_runner
        pool = getattr(runner, "pool", None)
        if pool is None:
            raise RuntimeError("the warm gateway keeps no warm sandboxes")

        async def ready() -> None:
            ok = await anyio.to_thread.run_sync(lambda: pool.wait_for(
                lambda: pool.ready() >= 1, _READY_WAIT))
            if not ok:
                raise RuntimeError(f"no warm sandbox was ready within {_READY_WAIT:g}s")

        ways: dict[str, Callable[[int], Awaitable[Any]]] = {
            "cold": lambda n: _run_code(cold, _program(n)),
            "warm": lambda n: _run_code(warm, _program(n)),
            "fastmcp": lambda n: _execute(monty, _monty_program(n)),
            "fastmcp_local": lambda n: _execute(local, _monty_program(n)),
        }
        for round_ in range(rounds):
            for n in sizes if round_ < max(3, rounds // 4) else (0,):
                for way, run in ways.items():
                    if way == "warm":
                        await ready()
                    started = time.perf_counter()
                    await run(n)
                    times[way][n].append((time.perf_counter() - started) * 1000)
    return _report(times, rounds, calls, pool)


def _report(times: dict[str, dict[int, list[float]]], rounds: int, calls: tuple[int, ...],
            pool: Any) -> dict[str, Any]:
    def pct(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    empty = {way: {"p50_ms": round(statistics.median(t[0]), 1),
                   "p90_ms": round(pct(t[0], 0.9), 1), "runs": len(t[0])}
             for way, t in times.items()}
    by_calls = {way: {n: round(statistics.median(t[n]), 1) for n in calls}
                for way, t in times.items()}
    fits = {way: _fit([(n, statistics.median(times[way][n])) for n in calls])
            for way in times}
    even = {base: _break_even(calls, by_calls["warm"], by_calls[base], fits["warm"], fits[base])
            for base in ("fastmcp", "fastmcp_local")}
    return {
        "rounds": rounds, "empty": empty, "calls": list(calls), "by_calls": by_calls,
        "fits": {way: {"start_ms": round(a, 1), "per_call_ms": round(b, 2)}
                 for way, (a, b) in fits.items()},
        "break_even": even,
        "pool": {"started": pool.started, "taken": pool.taken, "discarded": pool.discarded,
                 "peak_live": pool.peak},
    }


def _break_even(calls: tuple[int, ...], warm: dict[int, float], base: dict[int, float],
                warm_fit: tuple[float, float], base_fit: tuple[float, float]) -> dict[str, Any]:
    """The fewest inner calls at which warm byref is as fast as `base`: measured, and from the
    fitted lines (0 when warm starts sooner; None when it never catches up)."""
    measured = next((n for n in calls if warm[n] <= base[n]), None)
    (a_w, b_w), (a_f, b_f) = warm_fit, base_fit
    fitted = 0.0 if a_w <= a_f else (a_w - a_f) / (b_f - b_w) if b_f > b_w else None
    return {"measured": measured, "fitted": None if fitted is None else round(fitted, 1)}


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares: (start ms, ms a call)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0
    return my - slope * mx, slope


class _fastmcp:
    """FastMCP's CodeMode with a client in memory: over a FastMCP proxy of the bench upstream
    (`proxy`, the same upstream byref calls), or over an echo tool of its own, in process."""

    def __init__(self, *, proxy: bool) -> None:
        self.proxy = proxy

    async def __aenter__(self) -> Any:
        try:
            from fastmcp import Client
            from fastmcp.client.transports import StdioTransport
            from fastmcp.experimental.transforms.code_mode import CodeMode
            from fastmcp.server import create_proxy
        except ImportError as exc:
            raise RuntimeError(f"FastMCP is the baseline and is not installed ({exc}); "
                               "pip install 'byref[bench]'") from exc
        try:
            import pydantic_monty  # noqa: F401  (CodeMode's sandbox)
        except ImportError as exc:
            raise RuntimeError("FastMCP's CodeMode needs pydantic-monty; "
                               "pip install 'byref[bench]'") from exc
        if self.proxy:
            server: Any = create_proxy(StdioTransport(_upstream()[0], _upstream()[1:]),
                                       name="bench")
        else:
            from fastmcp import FastMCP

            def echo(text: str) -> str:
                """Return `text` unchanged."""
                return text

            server = FastMCP("bench")
            server.tool(echo)
        server.add_transform(CodeMode())
        self._client: Any = Client(server)
        return await self._client.__aenter__()  # type: ignore[no-untyped-call]

    async def __aexit__(self, *exc: Any) -> None:
        await self._client.__aexit__(*exc)


async def _run_code(client: Any, code: str) -> None:
    result = await client.call_tool("call_tool", {"name": "run_code",
                                                  "arguments": {"code": code}})
    if result.is_error:
        raise RuntimeError(f"run_code was refused: {result.content[0].text[:1000]}")


async def _execute(client: Any, code: str) -> None:
    result = await client.call_tool("execute", {"code": code}, raise_on_error=False)
    if result.is_error:
        raise RuntimeError(f"FastMCP's execute failed: {result.content[0].text[:1000]}")


def format_report(report: dict[str, Any]) -> str:
    """The figures as the CLI prints them."""
    e, c, f = report["empty"], report["by_calls"], report["fits"]
    names = {"cold": "byref cold", "warm": "byref warm", "fastmcp": "FastMCP CodeMode",
             "fastmcp_local": "FastMCP, local"}
    lines = [f"an empty program at the server, {report['rounds']} rounds interleaved:"]
    for way, got in e.items():
        lines.append(f"  {names[way]:<17} p50 {got['p50_ms']:>7.1f} ms  p90 {got['p90_ms']:>7.1f}"
                     f" ms  ×{got['p50_ms'] / e['fastmcp']['p50_ms']:.2f} FastMCP")
    lines.append("end to end by inner calls (p50 ms; start + per call fitted):")
    lines.append("  " + " " * 17 + "".join(f"{n:>9}" for n in report["calls"]))
    for way, got in c.items():
        lines.append(f"  {names[way]:<17}" + "".join(f"{got[n]:>9.1f}" for n in report["calls"])
                     + f"   {f[way]['start_ms']:.1f} + {f[way]['per_call_ms']:.2f}/call")
    for base, said in (("fastmcp", "FastMCP (the same upstream, through its proxy)"),
                       ("fastmcp_local", "FastMCP with its echo tool in process")):
        measured, fitted = report["break_even"][base]["measured"], \
            report["break_even"][base]["fitted"]
        lines.append(f"break-even, warm byref vs {said}: "
                     + (f"at {measured} inner calls measured" if measured is not None
                        else "not within the calls measured")
                     + ("" if fitted is None else f"; {fitted:g} from the fits"))
    p = report["pool"]
    lines.append(f"warm pool: {p['started']} started, {p['taken']} taken, {p['discarded']} "
                 f"discarded, at most {p['peak_live']} alive")
    return "\n".join(lines)
