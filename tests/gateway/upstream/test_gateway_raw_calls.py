"""byref's own plain `tools/call` path on a stdio upstream (`raw_calls`) against the SDK's path on
the same connection: for every kind of answer — text, an error result, an image, structured
content, a result outside the tool's output schema, a JSON-RPC error, a line that is not JSON-RPC,
a response that is malformed, the server exiting mid-call, a call that outlives its timeout — the
call gives the same result or the same `UpstreamError`; server→client requests and responses to
the SDK's ids still reach the SDK's session while byref's calls wait; many concurrent calls of both
kinds, answered out of order, each get their own answer. The upstream is a real child process
speaking JSON-RPC lines (scripted, so every misbehaviour is exact); which path a call took is what
the server saw on the wire (the request id)."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, get_tracer_provider

from _waits import scaled
from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.manager import Upstream

pytestmark = pytest.mark.anyio

SERVER = r"""
import json, os, sys
tools = [{"name": n, "inputSchema": {"type": "object"}} for n in (
    "echo", "id", "fail", "image", "refuse", "exit", "hang", "garble", "malformed", "ask",
    "later", "flush", "cancelled")]
tools += [{"name": n, "inputSchema": {"type": "object"}, "outputSchema": {
    "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
    for n in ("structured", "unstructured")]
held, asks, cancelled = [], {}, []
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def result(i, r):
    send({"jsonrpc": "2.0", "id": i, "result": r})
def text(t, **more):
    return {"content": [{"type": "text", "text": t}], **more}
for line in sys.stdin:
    m = json.loads(line)
    i, method, p = m.get("id"), m.get("method"), m.get("params") or {}
    if method is None:  # the client's answer to our own request
        result(asks.pop(i), text("asked: " + json.dumps(m.get("result"))))
    elif method == "initialize":
        result(i, {"protocolVersion": p["protocolVersion"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "scripted", "version": "1"}})
    elif method == "notifications/cancelled":
        cancelled.append(p)
    elif method.startswith("notifications/"):
        pass
    elif method == "ping":
        result(i, {})
    elif method == "tools/list":
        result(i, {"tools": tools})
    elif method == "tools/call":
        name, args = p["name"], p.get("arguments") or {}
        if name == "echo":
            result(i, text(args.get("text", ""), isError=False))
        elif name == "id":
            result(i, text(json.dumps(i)))
        elif name == "fail":
            result(i, text("it went wrong", isError=True))
        elif name == "image":
            result(i, {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"},
                                   {"type": "text", "text": "an image"}]})
        elif name == "structured":
            result(i, text("{\"n\": 3}", structuredContent={"n": 3}))
        elif name == "unstructured":
            result(i, text("no n", structuredContent={"m": 3}))
        elif name == "refuse":
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32602, "message": "no such thing",
                                                       "data": {"why": "scripted"}}})
        elif name == "exit":
            sys.stderr.write("fatal: told to exit\n"); sys.stderr.flush(); os._exit(3)
        elif name == "garble":
            sys.stdout.write("this is {not json-rpc\n"); sys.stdout.flush()
        elif name == "malformed":
            send({"jsonrpc": "2.0", "id": i, "result": [1, 2]})
        elif name == "ask":
            asks["s%d" % len(asks)] = i
            send({"jsonrpc": "2.0", "id": "s%d" % (len(asks) - 1), "method": "ping"})
        elif name == "later":
            held.append((i, args))
        elif name == "flush":
            for j, a in reversed(held):
                result(j, text(json.dumps(a)))
            held.clear()
            result(i, text("flushed"))
        elif name == "cancelled":
            result(i, text(json.dumps(cancelled)))
        # "hang": never answered
"""


@asynccontextmanager
async def _upstream(timeout: float = 10.0) -> AsyncIterator[Upstream]:
    if not isinstance(get_tracer_provider(), ProxyTracerProvider | NoOpTracerProvider):
        pytest.skip("a tracer provider is installed in this process: calls take the SDK's path")
    config = ServerConfig(name="scripted", command=sys.executable, args=("-c", SERVER),
                          timeout=timeout)
    async with anyio.create_task_group() as group:
        up = Upstream(config, group)
        try:
            await up.list_tools()  # connected, and the output schemas known to the session
            yield up
        finally:
            await up.close()


async def _raw(up: Upstream, tool: str, args: dict[str, Any]) -> Any:
    """The gateway's call (byref's own path when plain) — its result or its error's text."""
    try:
        return ("result", (await up.call(tool, args)).model_dump(by_alias=True))
    except UpstreamError as exc:
        return ("upstream-error", str(exc))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


async def _sdk(up: Upstream, tool: str, args: dict[str, Any]) -> Any:
    """The same call through the SDK's `call_tool` on the same connection and bounds."""
    try:
        result = await up.request(f"running {tool!r}", lambda c: c.call_tool(tool, args))
        return ("result", result.model_dump(by_alias=True))
    except UpstreamError as exc:
        return ("upstream-error", str(exc))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


async def _wire_id(up: Upstream) -> Any:
    result = await up.call("id", {})
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return json.loads(block.text)


async def test_a_plain_call_goes_byrefs_way_and_answers_as_the_sdk_does() -> None:
    with anyio.fail_after(scaled(60)):
        async with _upstream() as up:
            first, second = await _wire_id(up), await _wire_id(up)
            assert (first, second) == (-1, -2)  # byref's own id space
            sdk = await up.request("ids", lambda c: c.call_tool("id", {}))
            assert isinstance(sdk.content[0], types.TextContent)
            assert json.loads(sdk.content[0].text) > 0  # the SDK's own
            for tool, args in [("echo", {"text": "héllo\n"}), ("fail", {}), ("image", {}),
                               ("structured", {}), ("unstructured", {}), ("refuse", {}),
                               ("echo", {"text": "x" * 200_000})]:
                ours, theirs = await _raw(up, tool, args), await _sdk(up, tool, args)
                assert ours == theirs, tool
            assert await _raw(up, "refuse", {}) == (
                "upstream-error", "Server 'scripted' refused running 'refuse': no such thing")
            kind, image = await _raw(up, "image", {})
            assert kind == "result" and image["content"][0] == {
                "type": "image", "data": "aGk=", "mimeType": "image/png", "annotations": None,
                "_meta": None}
            assert (await _raw(up, "unstructured", {}))[0] == "RuntimeError"
            assert (await _raw(up, "fail", {}))[1]["isError"] is True


@pytest.mark.parametrize("tool", ["exit", "garble", "malformed"])
async def test_a_server_that_breaks_mid_call_fails_it_as_the_sdk_path_does(tool: str) -> None:
    outcomes = []
    with anyio.fail_after(scaled(60)):
        for call in (_raw, _sdk):
            async with _upstream() as up:
                waiting: list[Any] = []
                async with anyio.create_task_group() as group:
                    for _ in range(3):  # byref's calls waiting when it breaks fail too
                        group.start_soon(_collect, waiting, call(up, "later", {}))
                    await anyio.wait_all_tasks_blocked()
                    outcome = await call(up, tool, {})
                outcomes.append((outcome, sorted(map(str, waiting))))
                # and the next call starts the server again
                assert (await _raw(up, "echo", {"text": "back"}))[1]["content"][0]["text"] == "back"
    assert outcomes[0] == outcomes[1]
    (kind, said), waited = outcomes[0]
    assert kind == "upstream-error" and said.startswith("Server 'scripted' "), said
    assert len(waited) == 3 and all("upstream-error" in w for w in waited), waited
    if tool == "exit":
        assert said == ("Server 'scripted' stopped while running 'exit': it exited with code 3: "
                        "fatal: told to exit. It will be started again on the next call.")
    else:
        assert "it sent a message that is not valid JSON-RPC" in said


async def _collect(into: list[Any], outcome: Any) -> None:
    into.append(await outcome)


async def test_a_call_past_its_timeout_fails_as_the_sdk_path_and_is_cancelled_upstream() -> None:
    with anyio.fail_after(scaled(60)):
        async with _upstream(timeout=0.5) as up:
            ours, theirs = await _raw(up, "hang", {}), await _sdk(up, "hang", {})
            assert ours == theirs == ("upstream-error", "Server 'scripted' did not finish "
                                      "running 'hang' within 0.5 s.")
            kind, seen = await _raw(up, "cancelled", {})
            assert kind == "result", seen
            cancels = json.loads(seen["content"][0]["text"])
            assert [c["reason"] for c in cancels] == ["caller cancelled"] * 2
            assert cancels[0]["requestId"] < 0 < cancels[1]["requestId"]
            # the connection is kept (it answered a ping) and serves both paths
            assert await _raw(up, "echo", {"text": "ok"}) == await _sdk(up, "echo", {"text": "ok"})


async def test_after_the_upstream_exits_a_call_fails_at_once_and_the_next_restarts_it() -> None:
    with anyio.fail_after(scaled(60)):
        async with _upstream() as up:
            assert (await _raw(up, "exit", {}))[0] == "upstream-error"
            assert up.starts == 1
            assert (await _raw(up, "echo", {"text": "again"}))[0] == "result"
            assert up.starts == 2


async def test_server_requests_reach_the_sdk_while_byrefs_calls_wait() -> None:
    with anyio.fail_after(scaled(60)):
        async with _upstream() as up:
            # "ask" is answered only after the server's own ping request is answered by the
            # gateway's SDK session; byref's call waits across it.
            ours = await _raw(up, "ask", {})
            assert ours[1]["content"][0]["text"] == "asked: {}"
            assert ours == await _sdk(up, "ask", {})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=24),
       st.randoms(use_true_random=False))
def test_concurrent_raw_and_sdk_calls_each_get_their_own_answer(
        calls: list[tuple[bool, bool]], rng: random.Random) -> None:
    """Calls of both kinds, some answered at once, some held and answered in reverse order."""
    got: dict[int, Any] = {}
    wire: dict[int, Any] = {}

    async def one(up: Upstream, n: int, raw: bool, held: bool) -> None:
        args = {"n": n, "text": f"call {n}"}
        outcome = await (_raw if raw else _sdk)(up, "later" if held else "echo", args)
        assert outcome[0] == "result", outcome
        got[n] = outcome[1]["content"][0]["text"]

    async def run() -> None:
        with anyio.fail_after(scaled(60)):
            async with _upstream() as up, anyio.create_task_group() as group:
                order = list(enumerate(calls))
                rng.shuffle(order)
                for n, (raw, held) in order:
                    group.start_soon(one, up, n, raw, held)
                await anyio.wait_all_tasks_blocked()
                assert (await _raw(up, "flush", {}))[0] == "result"
                wire[0] = await _wire_id(up)

    anyio.run(run)
    for n, (_, held) in enumerate(calls):
        assert got[n] == (json.dumps({"n": n, "text": f"call {n}"}) if held else f"call {n}")
    assert wire[0] == -(sum(raw for raw, _ in calls) + 2)  # + flush and this one
