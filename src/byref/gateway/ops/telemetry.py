"""OpenTelemetry traces for the gateway (the `byref[otel]` extra: the SDK; the API ships with mcp).

Owns installing a tracer provider. The spans themselves are the MCP SDK's, which the gateway
sits between: a SERVER span per client request (its parent taken from the W3C `traceparent` in
the request's `_meta`), and, inside it, a CLIENT span per upstream request, whose context the
SDK injects into that request's `_meta` — so one trace runs client → gateway → upstream. The
law: without a provider installed nothing is recorded (the API's no-op); `install_tracing`
adds an exporter to the process's provider (creating an SDK one the first time), never
replacing one an application set.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from byref.errors import MissingExtra


def _sdk() -> Any:
    try:
        import opentelemetry.sdk.trace as sdk_trace
    except ImportError:
        raise MissingExtra("OpenTelemetry traces", "otel") from None
    return sdk_trace


def install_tracing(exporter: Any, *, batch: bool = True) -> Any:
    """Send every span of this process to `exporter` (a SpanExporter); the provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    sdk_trace = _sdk()
    provider: Any = trace.get_tracer_provider()
    if not isinstance(provider, sdk_trace.TracerProvider):
        provider = sdk_trace.TracerProvider(
            resource=Resource.create({"service.name": "byref-gateway"}))
        trace.set_tracer_provider(provider)
        provider = trace.get_tracer_provider()  # whichever won, if another set one meanwhile
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider


def trace_to_file(path: str | Path) -> Any:
    """Spans as JSON, one per line, appended to `path` (`byref gateway --otel FILE`)."""
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    handle = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 -- held for the process
    return install_tracing(ConsoleSpanExporter(
        out=handle, formatter=lambda span: span.to_json(indent=None) + "\n"))
