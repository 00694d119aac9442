"""OpenTelemetry through the gateway, with the SDK's in-memory exporter: a client request is a
SERVER span whose parent is the client's own span (W3C trace context in `_meta`), each upstream
request a CLIENT span inside it, and the upstream receives that span's `traceparent` in its
request's `_meta` — one trace from the client through the gateway to the server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from _gateway_rig import World, running, text
from mcp import Client

from _waits import scaled

pytestmark = pytest.mark.anyio
pytest.importorskip("opentelemetry.sdk", reason="byref[otel] is not installed")

from opentelemetry import trace  # noqa: E402
from opentelemetry.propagate import inject  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

from byref.gateway.ops.telemetry import install_tracing  # noqa: E402

_EXPORTER = InMemorySpanExporter()
_INSTALLED: list[Any] = []


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    if not _INSTALLED:  # one provider a process: the exporter is shared, cleared per test
        _INSTALLED.append(install_tracing(_EXPORTER, batch=False))
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


async def test_one_trace_runs_from_client_through_gateway_to_upstream(
        world: World, spans: InMemorySpanExporter) -> None:
    servers = {"echo": world.fixture("meta_echo.py")}
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            await client.list_tools()
            spans.clear()
            # The client's side of the trace: its own span, carried in the request's _meta.
            with trace.get_tracer("test-agent").start_as_current_span(
                    "agent turn", kind=SpanKind.CLIENT):
                carrier: dict[str, Any] = {}
                inject(carrier)
                result = await client.call_tool("call_tool", {
                    "name": "echo__echo_meta", "arguments": {}}, meta=carrier)  # type: ignore[arg-type]
            assert not result.is_error, text(result)
            received = json.loads(text(result))
    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    sent = by_name["agent turn"]  # the test's client
    served = by_name["tools/call call_tool"]  # the gateway, serving it
    upstream = by_name["MCP send tools/call echo_meta"]  # the gateway, calling the server
    assert (sent.kind, served.kind, upstream.kind) == (SpanKind.CLIENT, SpanKind.SERVER,
                                                      SpanKind.CLIENT)
    trace_id = sent.context.trace_id
    assert served.context.trace_id == upstream.context.trace_id == trace_id
    assert served.parent is not None and served.parent.span_id == sent.context.span_id
    assert upstream.parent is not None and upstream.parent.span_id == served.context.span_id
    assert served.attributes["gen_ai.tool.name"] == "call_tool"
    # What the upstream received on the wire: the gateway's CLIENT span as its parent.
    version, trace_hex, parent_hex, _flags = received["traceparent"].split("-")
    assert version == "00"
    assert int(trace_hex, 16) == trace_id
    assert int(parent_hex, 16) == upstream.context.span_id


async def test_a_failed_upstream_call_marks_its_spans(world: World,
                                                      spans: InMemorySpanExporter) -> None:
    servers = world.need("filesystem")
    with anyio.fail_after(scaled(60)):
        async with running(world, servers) as (_gateway, server), Client(server) as client:
            await client.list_tools()
            spans.clear()
            result = await client.call_tool("call_tool", {
                "name": "filesystem__read_text_file",
                "arguments": {"path": str(world.files / "missing.txt")}})
            assert result.is_error
    served = next(s for s in spans.get_finished_spans() if s.name == "tools/call call_tool")
    assert served.attributes["error.type"] == "tool_error"
    assert served.status.status_code.name == "ERROR"
