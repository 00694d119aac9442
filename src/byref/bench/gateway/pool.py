"""`byref bench gateway`, the pool line: a call on a pooled upstream against one on a shared one,
and what a principal's first call costs when it starts the principal's own process.

Owns `pool_figures`. Two HTTP gateways run in this process over the same bench upstream
(`upstream`, stdio), both reached by two tokens: one with the server `"share": "all"`
(one process for everyone), one with `"share": "principal"` (the default there: a process per
principal). A third gateway is the pooled one with `"prestart": "connect"`: a principal's
process starts when its client connects. The law: calls alternate between the two, one client
each, so both see the same machine; the per-call figure is a ratio of medians from the same
run; a first call is timed from a fresh principal's request to its answer (start-up, handshake,
listing and call), against a warm call of the same gateway; with prestart, the second
principal's first call is made once the pool shows its process up (as a model's first call
comes after its client connected and listed), against the same principal's first call without.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from byref.gateway import Gateway, listen_socket, serve_http
from byref.gateway.config.file import parse_config
from byref.gateway.wire.sdk_client import create_mcp_http_client

_TOKENS = {"bench-alice-0123456789abcdef": {"tenant": "bench", "principal": "alice"},
           "bench-bob-0123456789abcdef00": {"tenant": "bench", "principal": "bob"}}
_CALL = {"name": "bench__echo", "arguments": {"text": "ping"}}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def pool_figures(calls: int = 200) -> dict[str, Any]:
    """Per-call p50 through a pooled and a shared upstream (alternating), and first-call costs."""
    alice, bob = list(_TOKENS)
    out: dict[str, Any] = {"calls": calls}
    async with AsyncExitStack() as served:
        gateways: dict[str, Gateway] = {}
        urls: dict[str, Any] = {}
        for share in ("all", "principal", "prestart"):
            prestart = {"prestart": "connect"} if share == "prestart" else {}
            config = parse_config({"mcpServers": {"bench": {
                "command": sys.executable, "args": ["-m", "byref.bench.gateway.upstream"],
                "share": "principal" if share == "prestart" else share, **prestart}},
                "byref": {"tokens": _TOKENS}}, source="bench")
            gateways[share] = await served.enter_async_context(
                Gateway(config, errlog=io.StringIO()))
            urls[share] = listen_socket("127.0.0.1", 0)
            served.callback(urls[share].close)
        async with anyio.create_task_group() as group:
            for share, sock in urls.items():
                group.start_soon(_serve, gateways[share], sock)
            async with AsyncExitStack() as stack:
                clients: dict[str, dict[str, Client]] = {}
                for share, sock in urls.items():
                    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
                    clients[share] = {}
                    for token in (alice, bob):
                        clients[share][token] = await stack.enter_async_context(Client(
                            streamable_http_client(url, http_client=create_mcp_http_client(
                                headers={"Authorization": f"Bearer {token}"}))))
                out.update(await _measure(clients, calls, alice, bob))
                out.update(await _prestarted(gateways["prestart"], clients["prestart"], alice,
                                             bob, out["second_principal_first_call_ms"]))
            out["processes"] = {"shared": len(gateways["all"].upstreams["bench"].instances),
                                "pooled": gateways["principal"].upstreams.pool.live}
            group.cancel_scope.cancel()
    return out


async def _prestarted(gateway: Gateway, clients: dict[str, Client], alice: str, bob: str,
                      without_ms: float) -> dict[str, Any]:
    """The first calls on the prestart gateway (its clients connected at set-up): Alice's (it
    lists the catalog too) and Bob's, each once the pool shows its own process up."""
    pooled = gateway.upstreams["bench"]
    taken: dict[str, float] = {}
    for token in (alice, bob):
        key = ("bench", _TOKENS[token]["principal"])
        with anyio.fail_after(60):  # the start the connect began, bounded
            while (up := pooled.instances.get(key)) is None or up.connected is None:
                await anyio.sleep(0.01)
        started = time.perf_counter()
        await clients[token].call_tool("call_tool", _CALL)
        taken[token] = time.perf_counter() - started
    return {"prestart_first_call_ms": _ms(taken[alice]),
            "prestart_second_principal_first_call_ms": _ms(taken[bob]),
            "prestart_second_principal_vs_without": round(
                _ms(taken[bob]) / max(without_ms, 1e-9), 3),
            "prestarts": gateway.upstreams.pool.prestarts}


async def _serve(gateway: Gateway, sock: Any) -> None:
    await serve_http(gateway, sock, announce=io.StringIO())


async def _measure(clients: dict[str, dict[str, Client]], calls: int, alice: str, bob: str
                   ) -> dict[str, Any]:
    first: dict[str, float] = {}
    for share in ("all", "principal"):
        started = time.perf_counter()
        await clients[share][alice].call_tool("call_tool", _CALL)
        first[share] = time.perf_counter() - started
    # Bob's first call: on the pooled gateway it starts Bob's own process (the catalog is listed).
    started = time.perf_counter()
    await clients["principal"][bob].call_tool("call_tool", _CALL)
    second_principal = time.perf_counter() - started
    taken: dict[str, list[float]] = {"all": [], "principal": []}
    for i in range(calls):
        for share in (("all", "principal") if i % 2 else ("principal", "all")):
            started = time.perf_counter()
            await clients[share][alice].call_tool("call_tool", _CALL)
            taken[share].append(time.perf_counter() - started)
    shared, pooled = (statistics.median(taken[s]) for s in ("all", "principal"))
    return {"shared_p50_ms": _ms(shared), "pooled_p50_ms": _ms(pooled),
            "pooled_vs_shared_p50": round(pooled / shared, 3),
            "first_call_ms": {"shared": _ms(first["all"]), "pooled": _ms(first["principal"])},
            "second_principal_first_call_ms": _ms(second_principal),
            "second_principal_vs_warm": round(second_principal / pooled, 1)}
