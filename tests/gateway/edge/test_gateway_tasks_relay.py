"""An upstream that answers with MCP tasks: a gateway (the outer) in front of another gateway
(the inner, a real 2026-07-28 tasks-capable server over HTTP, in direct mode, in front of the
conformance fixture). The outer declares the extension to the inner and drives the inner's
tasks to completion at their `pollIntervalMs`: a handshake-era client's long call is answered
synchronously; a client that declared the extension gets the outer's own task (its id bound to
the outer's owner), whose cancel cancels the inner's task too. The outer's timeout for the inner
bounds each poll, not the task: a call twice as long completes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_gateway_tasks import TOKEN, _rpc, serving

BOUND = 60.0
TIMEOUT = 3
"""The outer's timeout for the inner: it bounds each poll of a task, not the task."""


@pytest.fixture
def outer(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(outer URL, inner URL)."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "outer").mkdir()
    for inner, *_ in serving(tmp_path / "inner", mode="direct"):
        servers = {"inner": {"type": "http", "url": inner, "timeout": TIMEOUT,
                             "headers": {"Authorization": f"Bearer {TOKEN}"}}}
        for url, *_ in serving(tmp_path / "outer", servers):
            yield url, inner


def _metric(url: str, status: str) -> float:
    scraped = httpx.get(url.removesuffix("/mcp") + "/metrics", timeout=30).text
    line = f'byref_gateway_tasks_total{{status="{status}"}} '
    found = [float(s.rsplit(" ", 1)[1]) for s in scraped.splitlines() if s.startswith(line)]
    return found[0] if found else 0.0


def _eventually(check: object, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(what)


def _name(inner: str, tool: str) -> str:
    """The name the inner gateway lists `tool` under (the outer runs it by that name)."""
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        listed = _rpc(inner, "tools/list", {}, tasks=False)["result"]["tools"]
        found = [t["name"] for t in listed if t["name"].endswith(tool)]
        if found:
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"the inner gateway never listed {tool!r}")


def test_a_handshake_era_clients_long_call_is_driven_through_the_inner_task(
        outer: tuple[str, str]) -> None:
    url, inner = outer
    name = _name(inner, "slow_compute")
    headers = {"Authorization": f"Bearer {TOKEN}",
               "Accept": "application/json, text/event-stream"}
    init = httpx.post(url, timeout=BOUND, headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "clientInfo": {"name": "old", "version": "1"},
            "capabilities": {}}})
    session = {**headers, "Mcp-Session-Id": init.headers["mcp-session-id"],
               "MCP-Protocol-Version": "2025-11-25"}
    httpx.post(url, timeout=BOUND, headers=session, json={
        "jsonrpc": "2.0", "method": "notifications/initialized"})
    answer = httpx.post(url, timeout=BOUND, headers=session, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": name, "arguments": {"seconds": 2 * TIMEOUT, "label": "relayed"}}}).json()
    result = answer["result"]
    assert "taskId" not in result and not result.get("isError"), result
    assert f"Computed relayed after {2 * TIMEOUT}" in result["content"][0]["text"], result
    # The inner made a task of it and the outer polled it to completion.
    assert _metric(inner, "created") == 1 and _metric(inner, "completed") == 1
    assert _metric(url, "created") == 0  # the outer's client declared nothing


def test_a_declaring_clients_task_cancels_the_inner_task(outer: tuple[str, str]) -> None:
    url, inner = outer
    name = _name(inner, "slow_compute")
    made = _rpc(url, "tools/call", {"name": name, "arguments": {"seconds": 120}})["result"]
    assert made["resultType"] == "task", made
    _eventually(lambda: _metric(inner, "created") == 1, "the inner never made its task")
    assert _rpc(url, "tasks/get", {"taskId": made["taskId"]})["result"]["status"] == "working"
    ack = _rpc(url, "tasks/cancel", {"taskId": made["taskId"]})["result"]
    assert ack["resultType"] == "complete" and "status" not in ack, ack
    _eventually(lambda: _metric(inner, "cancelled") == 1,
                "the outer's cancel never reached the inner's task")
    assert _rpc(url, "tasks/get", {"taskId": made["taskId"]})["result"]["status"] == "cancelled"
