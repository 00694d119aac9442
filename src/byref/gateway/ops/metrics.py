"""Prometheus metrics for the gateway, with `prometheus-client` (the `byref[metrics]` extra).

Owns `GatewayMetrics`: one registry per gateway (so two gateways in a process never share
counts) holding calls, errors and latency per server and tool — a client's calls (`via="client"`)
and the calls its code made from run_code (`via="code"`, whose outcome may be `cancelled`: given
up on at its timeout or the run's end) — results placed and the bytes they kept out of the
context, refusals by reason, open conversations, and the upstream pool (pooled processes live and
idle, starts refused by limit, instances stopped as idle), and MCP tasks (created and settled by
status, from the `task` events; running in this process now). The law: metrics are read from what
the gateway already knows — a call's recorded result part, an inner call's end as dispatch tells
it, and the typed events its dispatch emits (`MetricsSink` sits in front of the event sink) —
never by re-reading a result; labels are bounded (server and tool names from the catalog,
`byref` for the gateway's own tools, `unknown` for a name the catalog does not hold, reasons from
dispatch's fixed set), never a value a model wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from byref.errors import MissingExtra
from byref.events import Event, EventSink

NAMESPACE = "byref_gateway"
Via = Literal["client", "code"]
"""Who made a call: the client, or code the client ran (run_code)."""
Outcome = Literal["ok", "error", "cancelled"]


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise MissingExtra("Gateway metrics (prometheus-client)", "metrics") from None
    return prometheus_client


class GatewayMetrics:
    """The gateway's Prometheus metrics in their own registry; raises RuntimeError when
    prometheus-client is not installed."""

    def __init__(self, conversations: Callable[[], int] | None = None,
                 pool: Callable[[], Any] | None = None) -> None:
        prom = _client()
        self.registry = prom.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = prom.Counter(f"{NAMESPACE}_calls", "Tool calls, by server, tool, outcome "
                                  "(ok, error; cancelled: a call from code given up on) and who "
                                  "made it (via: client, or code run by run_code).",
                                  ["server", "tool", "outcome", "via"], registry=r)
        self.latency = prom.Histogram(
            f"{NAMESPACE}_call_seconds", "Seconds a tool call took in the gateway, upstream "
            "included, by who made it (via: client, or code run by run_code).",
            ["server", "tool", "via"], registry=r,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.placed = prom.Counter(f"{NAMESPACE}_placed_results", "Results stored instead of "
                                   "inserted into the context, by tool.", ["tool"], registry=r)
        self.kept_out = prom.Counter(f"{NAMESPACE}_bytes_kept_out", "Bytes of results placed "
                                     "in the store instead of the context.", registry=r)
        self.refusals = prom.Counter(f"{NAMESPACE}_refusals", "Refusals told to the model, by "
                                     "reason.", ["reason"], registry=r)
        self.conversations = prom.Gauge(f"{NAMESPACE}_conversations", "Conversations held in "
                                        "memory now.", registry=r)
        if conversations is not None:
            self.conversations.set_function(conversations)
        self.tasks = prom.Counter(f"{NAMESPACE}_tasks", "MCP tasks by what became of them: "
                                  "created, completed, failed, cancelled.", ["status"],
                                  registry=r)
        for status in ("created", "completed", "failed", "cancelled"):
            self.tasks.labels(status)  # exported at 0 from the start
        self.tasks_running = prom.Gauge(f"{NAMESPACE}_tasks_running", "MCP tasks running in "
                                        "this gateway process now.", registry=r)
        self._pool = pool
        if pool is not None:
            r.register(_PoolCollector(prom, pool))
        self._children: dict[tuple[str, str, str], dict[str, Any]] = {}

    def call(self, server: str, tool: str, outcome: Outcome, seconds: float, *,
             via: Via = "client") -> None:
        """Count one tool call by server, tool, outcome and who made it, and observe its
        latency."""
        key = (server, tool, via)
        children = self._children.get(key)
        if children is None:  # labels() is the costly part: each (server, tool, via) once
            children = self._children[key] = {
                "ok": self.calls.labels(server, tool, "ok", via),
                "error": self.calls.labels(server, tool, "error", via),
                "seconds": self.latency.labels(server, tool, via)}
        counter = children.get(outcome)
        if counter is None:
            counter = children[outcome] = self.calls.labels(server, tool, outcome, via)
        counter.inc()
        children["seconds"].observe(seconds)

    def event(self, event: Event) -> None:
        """Count what a dispatch event tells: a placed result and its bytes, or a refusal by
        reason."""
        if event.name == "placed":
            self.placed.labels(str(event.data.get("tool", "?"))).inc()
            size = event.data.get("bytes")
            if isinstance(size, int) and size > 0:
                self.kept_out.inc(size)
        elif event.name == "refused":
            self.refusals.labels(str(event.data.get("reason", "unknown"))).inc()
        elif event.name == "task" and event.data.get("status") in (
                "created", "completed", "failed", "cancelled"):
            self.tasks.labels(str(event.data["status"])).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text format a Prometheus scrape reads, and its content type."""
        prom = _client()
        return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST


class _PoolCollector:
    """The upstream pool, read at scrape time (`pool()` is None while the gateway is stopped)."""

    def __init__(self, prom: Any, pool: Callable[[], Any]) -> None:
        self._prom, self._pool = prom, pool

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Any:
        from prometheus_client import core
        pool = self._pool()
        live = idle = stopped = 0
        refused: dict[str, int] = {}
        if pool is not None:
            live, idle, stopped, refused = pool.live, pool.idle_now, pool.stopped_idle, \
                dict(pool.refused)
        processes = core.GaugeMetricFamily(
            f"{NAMESPACE}_upstream_processes", "Pooled upstream processes (and remote sessions) "
            "by state: live (running or starting), idle (live with no call in flight).",
            labels=["state"])
        processes.add_metric(["live"], live)
        processes.add_metric(["idle"], idle)
        yield processes
        refusals = core.CounterMetricFamily(
            f"{NAMESPACE}_upstream_refused", "Upstream starts refused by a pool limit.",
            labels=["limit"])
        for limit in ("maxProcesses", "maxPerTenant"):
            refusals.add_metric([limit], refused.get(limit, 0))
        yield refusals
        yield core.CounterMetricFamily(f"{NAMESPACE}_upstream_idle_stops", "Pooled upstream "
                                       "processes stopped after their idle time.", value=stopped)


class MetricsSink:
    """Counts the events metrics read, then hands every event to the sink it stands before."""

    def __init__(self, metrics: GatewayMetrics, inner: EventSink) -> None:
        self.metrics, self.inner = metrics, inner

    def emit(self, event: Event) -> None:
        """Count the event, then pass it on."""
        self.metrics.event(event)
        self.inner.emit(event)
