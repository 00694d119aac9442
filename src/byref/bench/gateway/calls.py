"""The per-call figures of `byref bench gateway`: the bench upstream called directly and through
`byref gateway`, every figure a ratio to the direct call in the same run.

Owns seven sections, each with its own fresh processes (all started together, then timed one
section at a time while the others idle, so no figure is taken while processes start): `stdio`
(an activated tool called by name, and the same tool through `call_tool`), `http` (a call,
`tools/list` and `search_tools` over streamable HTTP; the gateway's upstream stays on stdio, as
a client's servers usually are), `session` (one long session: p50 of its first and last calls,
and RSS growth per call of the gateway process beside the directly-served upstream's),
`results` (a large plain text, a large log with an error every other line, and one four times
its size to show how the cost scales), and `direct_mode` (a gateway in `byref.mode: "direct"`,
whose tools are declared without activation, called by name beside the search-mode gateway's
activated tool and the direct call, all three interleaved), and `sdk_floor` (the gateway's
activated tool beside `floor`, the least proxy the `mcp` SDK makes — its server and
client, no byref code — so a reader sees how much of the ratio is the SDK's two extra edges),
and `tasks` (a poll of a running MCP task, and a short call of a client that declared the
extension, `bench.gateway.tasks`).
The law: sides are timed
interleaved, never one after the other, and a figure is compared only with the direct call
that does the same thing.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from byref.bench.gateway.rig import (
    START_TIMEOUT,
    TOKEN,
    UPSTREAM,
    Stage,
    announced,
    checked,
    child_pid,
    floor_stdio,
    gateway_command,
    gateway_stdio,
    http_client,
    interleaved,
    row,
    rss_kib,
    stdio_client,
    upstream_command,
    upstream_stdio,
    write_config,
)
from byref.bench.gateway.tasks import tasks_figures
from byref.gateway.catalog.convert import qualified_name

ECHO, TEXT = qualified_name(UPSTREAM, "echo"), qualified_name(UPSTREAM, "text")
ECHO_ARGS = {"text": "ping"}

Tick = Callable[[float], None]


@dataclass(frozen=True)
class Plan:
    """How much each section runs (`QUICK` for a smoke run, `FULL` for the figures)."""

    calls: int = 300
    """Timed calls per side in the stdio and HTTP figures."""
    warmup: int = 20
    session: int = 5_000
    window: int = 1_000
    """Calls at each end of the session whose p50 is compared."""
    big: int = 1 << 20
    """Characters of the large results (the scaling one is four times as many)."""
    rounds: int = 5

    def steps(self) -> int:
        """Interleaved rounds in all sections (for a progress bar)."""
        return (7 * (self.warmup + self.calls) + self.warmup + self.session
                + 3 * (1 + self.rounds))


FULL = Plan()
QUICK = Plan(calls=10, warmup=2, session=40, window=10, big=48 << 10, rounds=1)


def _call(client: Client, name: str, args: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    check = checked(name)

    async def go() -> Any:
        return check(await client.call_tool(name, args))
    return go


def _via(client: Client, name: str, args: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return _call(client, "call_tool", {"name": name, "arguments": args})


def _listing(client: Client) -> Callable[[], Awaitable[Any]]:
    async def go() -> Any:
        return await client.list_tools()
    return go


async def call_figures(plan: Plan, config: Path, tick: Tick) -> dict[str, Any]:
    """Every section: started together, timed one at a time, closed together."""
    runs = {"stdio": stdio_figures, "http": http_figures, "session": session_figures,
            "results": results_figures, "direct_mode": direct_mode_figures,
            "sdk_floor": floor_figures, "tasks": tasks_figures}
    stage, out = Stage(len(runs)), {}

    async def one(name: str) -> None:
        out[name] = await runs[name](plan, config, tick, stage)

    with anyio.fail_after(START_TIMEOUT + 600 + plan.steps()):
        async with anyio.create_task_group() as group:
            for name in runs:
                group.start_soon(one, name)
    return {name: out[name] for name in runs}


async def stdio_figures(plan: Plan, config: Path, tick: Tick, stage: Stage) -> dict[str, Any]:
    """The stdio section: an activated tool by name and the same tool through call_tool, each a
    ratio to the direct call."""
    async with stdio_client(upstream_stdio()) as direct, \
            stdio_client(gateway_stdio(config)) as gateway:
        await _call(gateway, "activate_tool", {"names": [ECHO]})()
        sides = {"direct": _call(direct, "echo", ECHO_ARGS),
                 "activated": _call(gateway, ECHO, ECHO_ARGS),
                 "call_tool": _via(gateway, ECHO, ECHO_ARGS)}
        async with stage.turn():
            t = await interleaved(sides, plan.calls, plan.warmup, tick)
    return {"calls": plan.calls, "activated": row(t["direct"], t["activated"]),
            "call_tool": row(t["direct"], t["call_tool"]),
            "call_tool_vs_activated_p50": round(
                statistics.median(t["call_tool"]) / statistics.median(t["activated"]), 2)}


async def floor_figures(plan: Plan, config: Path, tick: Tick, stage: Stage) -> dict[str, Any]:
    """The SDK floor section: the gateway's activated tool beside `floor` (the SDK's own
    server and client, no byref code, in front of its own copy of the upstream) and the direct
    call, all three interleaved."""
    async with stdio_client(upstream_stdio()) as direct, \
            stdio_client(gateway_stdio(config)) as gateway, \
            stdio_client(floor_stdio()) as floor:
        await _call(gateway, "activate_tool", {"names": [ECHO]})()
        await floor.list_tools()  # as the direct side: the client has seen the tool listed
        sides = {"direct": _call(direct, "echo", ECHO_ARGS),
                 "activated": _call(gateway, ECHO, ECHO_ARGS),
                 "sdk_floor": _call(floor, "echo", ECHO_ARGS)}
        async with stage.turn():
            t = await interleaved(sides, plan.calls, plan.warmup, tick)
    return {"calls": plan.calls, "activated": row(t["direct"], t["activated"]),
            "sdk_floor": row(t["direct"], t["sdk_floor"]),
            "activated_vs_sdk_floor_p50": round(
                statistics.median(t["activated"]) / statistics.median(t["sdk_floor"]), 2)}


async def direct_mode_figures(plan: Plan, config: Path, tick: Tick, stage: Stage
                              ) -> dict[str, Any]:
    """A direct-mode gateway's declared tool by name, beside the search-mode gateway's activated
    tool and the direct call (interleaved, one run)."""
    direct_config = write_config(config.with_name(f"{config.stem}-direct.json"), mode="direct")
    async with stdio_client(upstream_stdio()) as direct, \
            stdio_client(gateway_stdio(direct_config)) as direct_mode, \
            stdio_client(gateway_stdio(config)) as search_mode:
        # A first list answers within 1 s with what is ready: one call waits for the server to
        # start, and the list after it declares the tool.
        await _call(direct_mode, ECHO, ECHO_ARGS)()
        declared = {t.name for t in (await direct_mode.list_tools()).tools}
        if ECHO not in declared:
            raise RuntimeError(f"the direct-mode gateway does not declare {ECHO!r}: {declared!r}")
        await _call(search_mode, "activate_tool", {"names": [ECHO]})()
        sides = {"direct": _call(direct, "echo", ECHO_ARGS),
                 "direct_mode": _call(direct_mode, ECHO, ECHO_ARGS),
                 "search_mode": _call(search_mode, ECHO, ECHO_ARGS)}
        async with stage.turn():
            t = await interleaved(sides, plan.calls, plan.warmup, tick)
    return {"calls": plan.calls, "declared": len(declared),
            "direct_mode": row(t["direct"], t["direct_mode"]),
            "search_mode": row(t["direct"], t["search_mode"]),
            "direct_mode_vs_search_mode_p50": round(
                statistics.median(t["direct_mode"]) / statistics.median(t["search_mode"]), 2)}


async def http_figures(plan: Plan, config: Path, tick: Tick, stage: Stage) -> dict[str, Any]:
    """The HTTP section: a call, tools/list and search_tools through the gateway over streamable
    HTTP, each a ratio to a direct call."""
    gateway_http = gateway_command(config, "--transport", "http", "--port", "0")
    async with announced(upstream_command("--http")) as upstream_url, \
            announced(gateway_http) as gateway_url, \
            http_client(upstream_url) as direct, http_client(gateway_url, TOKEN) as gateway:
        small, via = _call(direct, "echo", ECHO_ARGS), _via(gateway, ECHO, ECHO_ARGS)
        await small()
        await via()  # the gateway starts its upstream on the first call: not timed
        search = _call(gateway, "search_tools", {"query": "echo text back"})
        async with stage.turn():
            calls = await interleaved({"direct": small, "gateway": via},
                                      plan.calls, plan.warmup, tick)
            lists = await interleaved({"direct": _listing(direct), "gateway": _listing(gateway)},
                                      plan.calls, plan.warmup, tick)
            searches = await interleaved({"direct": small, "gateway": search},
                                         plan.calls, plan.warmup, tick)
    # Both servers' loop: the gateway's `--loop auto` and uvicorn's own pick the same one.
    loop = "uvloop" if find_spec("uvloop") is not None else "asyncio"
    return {"calls": plan.calls, "upstream_behind_gateway": "stdio", "event_loop": loop,
            "call_tool": row(calls["direct"], calls["gateway"]),
            "tools_list": row(lists["direct"], lists["gateway"]),
            "search_tools_vs_direct_call": row(searches["direct"], searches["gateway"])}


async def session_figures(plan: Plan, config: Path, tick: Tick, stage: Stage
                          ) -> dict[str, Any]:
    """The long session: p50 of its first and last `window` calls and RSS growth per call, the
    gateway's beside the direct upstream's."""
    # Labels on the command lines tell this section's two processes from the others'.
    async with stdio_client(upstream_stdio("session")) as direct, \
            stdio_client(gateway_stdio(config, "session")) as gateway:
        pids = {"gateway": child_pid(gateway_command(config, "--scope", "session")),
                "direct": child_pid(upstream_command("--label", "session"))}
        sides = {"direct": _call(direct, "echo", ECHO_ARGS),
                 "gateway": _via(gateway, ECHO, ECHO_ARGS)}
        await sides["gateway"]()  # starts the gateway's upstream: not timed, not a warm-up
        async with stage.turn():
            await interleaved(sides, 0, plan.warmup, tick)
            before = {side: rss_kib(pid) for side, pid in pids.items()}
            t = await interleaved(sides, plan.session, 0, tick)
            after = {side: rss_kib(pid) for side, pid in pids.items()}
    w = min(plan.window, plan.session)
    first = row(t["direct"][:w], t["gateway"][:w])
    last = row(t["direct"][-w:], t["gateway"][-w:])
    rss: dict[str, Any] = {}
    for side in pids:
        b, a = before[side], after[side]
        rss[f"{side}_start_mib"] = None if b is None else round(b / 1024, 1)
        rss[f"{side}_end_mib"] = None if a is None else round(a / 1024, 1)
        rss[f"{side}_kib_per_call"] = (None if a is None or b is None
                                       else round((a - b) / plan.session, 3))
    return {"calls": plan.session, "window": w, "first": first, "last": last,
            "gateway_last_vs_first_p50": round(
                last["gateway_p50_ms"] / first["gateway_p50_ms"], 2), "rss": rss}


async def results_figures(plan: Plan, config: Path, tick: Tick, stage: Stage
                          ) -> dict[str, Any]:
    """The large results: plain text, a log, and a log four times as big, each a ratio to the
    direct call with the characters each side showed, and how the cost grew with size."""
    cases = {"plain": (plan.big, "plain"), "log": (plan.big, "log"),
             "log_x4": (4 * plan.big, "log")}
    out: dict[str, Any] = {}
    async with stdio_client(upstream_stdio()) as direct, \
            stdio_client(gateway_stdio(config)) as gateway:
        await _via(gateway, ECHO, ECHO_ARGS)()  # starts the gateway's upstream: not timed
        async with stage.turn():
            for label, (size, shape) in cases.items():
                args = {"size": size, "shape": shape}
                sides = {"direct": _call(direct, "text", args),
                         "gateway": _via(gateway, TEXT, args)}
                # One warm-up round: each upstream process builds the text once, then serves it.
                answers: dict[str, Any] = {}
                t = await interleaved(sides, plan.rounds, 1, tick, answers)
                shown = {side: len(_text(answer)) for side, answer in answers.items()}
                out[label] = {"chars": size, "shape": shape, "rounds": plan.rounds,
                              **row(t["direct"], t["gateway"], p95=False),
                              "direct_chars_shown": shown["direct"],
                              "gateway_chars_shown": shown["gateway"]}
    one, four = out["log"], out["log_x4"]
    out["log_x4_vs_log"] = {
        "chars": 4.0, "direct": round(four["direct_p50_ms"] / one["direct_p50_ms"], 2),
        "gateway": round(four["gateway_p50_ms"] / one["gateway_p50_ms"], 2)}
    return out


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)
