"""Operations endpoints of an HTTP gateway: /healthz answers while the process serves; /readyz
is 503 naming what is not ready (an unreachable state store, upstreams still listing) and 200
once state, store and every upstream answer; /metrics is Prometheus text with calls, errors and
latency per server and tool, placed results and the bytes they kept out, refusals by reason."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import httpx2
import pytest
from _gateway_rig import World, served, text
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from _waits import scaled
from byref.gateway import Gateway

pytestmark = pytest.mark.anyio
prometheus = pytest.importorskip("prometheus_client", reason="byref[metrics] is not installed")

TOKEN = "ops-token-0123456789abcdef"
TOKENS = {TOKEN: {"tenant": "acme", "principal": "ops"}}


def serving(world: World, servers: dict[str, Any], **options: Any
            ) -> AbstractAsyncContextManager[tuple[Gateway, str]]:
    return served(world, servers, tokens=TOKENS, path="", **options)


async def _ready(http: httpx2.AsyncClient, base: str) -> dict[str, Any]:
    # the first probe starts the listing; each later one re-reads
    with anyio.fail_after(scaled(30)):
        while True:
            answer = await http.get(f"{base}/readyz")
            if answer.status_code == 200:
                body: dict[str, Any] = answer.json()
                return body
            assert answer.status_code == 503, answer.text
            await anyio.sleep(0.05)


async def test_health_and_readiness(world: World) -> None:
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time")) as (gateway, base), httpx2.AsyncClient(
                timeout=scaled(10)) as http:
            health = await http.get(f"{base}/healthz")
            assert (health.status_code, health.json()) == (200, {"ok": True})
            ready = await _ready(http, base)
            assert ready == {"ready": True, "checks": {
                "state": {"ok": True, "detail": "answers"},
                "store": {"ok": True, "detail": "answers"},
                # One principal: the server is shared by all, outside the pool.
                "pool": {"ok": True, "live": 0, "idle": 0, "refused": {}, "detail":
                         "0 pooled upstream processes live, 0 idle, 0 starts refused"},
                "upstreams": {"ok": True, "detail": "1 listed"}}}
            assert gateway.upstreams["time"].starts == 1  # readiness indexed it


async def test_not_ready_names_what_is_not(world: World) -> None:
    dead = "postgresql://root@127.0.0.1:1/test?connect_timeout=2"
    with anyio.fail_after(scaled(60)):
        async with serving(world, world.need("time"), state=dead) as (_gateway, base), (
                httpx2.AsyncClient(timeout=scaled(10))) as http:
            answer = await http.get(f"{base}/readyz")
            assert answer.status_code == 503
            checks = answer.json()["checks"]
            assert checks["state"]["ok"] is False
            assert checks["state"]["detail"].startswith(
                "ConversationError: Cannot reach PostgreSQL at "
                "'postgresql://root@127.0.0.1:1/test?connect_timeout=2' for conversation state")
            assert checks["store"] == {"ok": True, "detail": "answers"}
            assert (await http.get(f"{base}/healthz")).status_code == 200  # alive all the same


def _samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(exposition) for s in family.samples}


async def test_metrics_count_calls_errors_placements_and_refusals(world: World) -> None:
    servers = world.need("filesystem")
    (world.files / "small.txt").write_text("small\n")
    big = "a line that is kept out of the context\n" * 2_000
    (world.files / "big.txt").write_text(big)
    read = "filesystem__read_text_file"
    with anyio.fail_after(scaled(90)):
        async with serving(world, servers) as (_gateway, base):
            http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http_client)
                              ) as client:
                for name in ("small.txt", "big.txt"):
                    done = await client.call_tool("call_tool", {
                        "name": read, "arguments": {"path": str(world.files / name)}})
                    assert not done.is_error, text(done)
                failed = await client.call_tool("call_tool", {
                    "name": read, "arguments": {"path": str(world.files / "missing.txt")}})
                assert failed.is_error
                refused = await client.call_tool("call_tool", {
                    "name": read, "arguments": {"path": {"$ref": {
                        "type": "Message", "seq": 1, "part": 0}}}})
                assert refused.is_error
            async with httpx2.AsyncClient(timeout=scaled(10)) as http:
                scraped = await http.get(f"{base}/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    got = _samples(scraped.text)
    ok = ("byref_gateway_calls_total", (("outcome", "ok"), ("server", "filesystem"),
                                        ("tool", read), ("via", "client")))
    error = ("byref_gateway_calls_total", (("outcome", "error"), ("server", "filesystem"),
                                           ("tool", read), ("via", "client")))
    assert (got[ok], got[error]) == (2, 2)
    count = ("byref_gateway_call_seconds_count", (("server", "filesystem"), ("tool", read),
                                                  ("via", "client")))
    assert got[count] == 4
    assert got[("byref_gateway_placed_results_total", (("tool", read),))] == 1
    assert got[("byref_gateway_bytes_kept_out_total", ())] >= len(big)
    reasons = {dict(labels)["reason"] for (name, labels), value in got.items()
               if name == "byref_gateway_refusals_total" and value > 0}
    assert reasons, got  # the stale Message ref was refused, with its reason as the label
    assert got[("byref_gateway_conversations", ())] >= 0
