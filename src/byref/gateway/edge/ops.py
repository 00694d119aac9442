"""The operations endpoints of an HTTP gateway: `/healthz`, `/readyz` and `/metrics`.

Owns their routes (served beside `/mcp`, without a bearer token: probes and scrapers carry none,
and no answer here holds a tool result, a ref or a principal). The law: `/healthz` says the process
serves (200 while the event loop answers); `/readyz` is 200 only when the conversation state
answers a lookup, the artifact store answers one, and every upstream has been indexed (listed, or
failed and reported — a server still starting is not ready yet; the first probe starts the
listing), else 503 naming what is not; a failed server's reason is given in full (what clients are
told is only its class) with its configured values taken out; it shows the upstream pool (pooled
processes live and idle, starts refused by limit; informative, never unready); `/metrics` is the
Prometheus text of this gateway's registry (404 without the `byref[metrics]` extra).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from byref.store import Scope

if TYPE_CHECKING:
    from byref.gateway.core import Gateway

PROBE = Scope("byref-ops", "readiness", "probe")
PROBE_REF = "art_" + "0" * 22
"""A well-formed ref no store mints (refs are random): a lookup that must answer None."""


def ops_routes(gateway: Gateway) -> list[Any]:
    """The operator routes: `/healthz` (the process answers), `/readyz` (200 or 503 with each
    check, `readiness`) and `/metrics` (Prometheus text; 404 without the metrics extra)."""
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def healthz(request: Request) -> Response:
        return Response(b'{"ok": true}', media_type="application/json")

    async def readyz(request: Request) -> Response:
        checks = await readiness(gateway)
        ready = all(c["ok"] for c in checks.values())
        body = json.dumps({"ready": ready, "checks": checks}, sort_keys=True).encode()
        return Response(body, status_code=200 if ready else 503,
                        media_type="application/json")

    async def metrics(request: Request) -> Response:
        if gateway.metrics is None:
            # No install line: it would show this host's paths to whoever scrapes the port.
            return Response(b"metrics need prometheus-client (byref's 'metrics' extra), which "
                            b"is not installed beside this gateway\n",
                            status_code=404, media_type="text/plain")
        body, kind = gateway.metrics.exposition()
        return Response(body, media_type=kind)

    return [Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"])]


async def readiness(gateway: Gateway) -> dict[str, dict[str, Any]]:
    """Each check → {"ok": bool, "detail": text}."""
    out: dict[str, dict[str, Any]] = {}

    def state() -> None:
        gateway.scopes.conversations.find(PROBE)

    def store() -> None:
        gateway.store.head(PROBE, PROBE_REF)

    for name, probe in (("state", state), ("store", store)):
        try:
            with anyio.fail_after(5):
                await anyio.to_thread.run_sync(probe)
        except Exception as exc:  # whatever failed, the answer is "not ready", with why
            out[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:300]}
        else:
            out[name] = {"ok": True, "detail": "answers"}
    await gateway.toolbox(wait=0)  # starts any listing not yet started; waits for none
    indexed = gateway.indexed()
    waiting = sorted(n for n, how in indexed.items() if how == "pending")
    failed = sorted(n for n, how in indexed.items() if how == "failed")
    pool = gateway.upstreams.pool
    out["pool"] = {"ok": True, "live": pool.live, "idle": pool.idle_now,
                   "refused": dict(pool.refused),
                   "detail": f"{pool.live} pooled upstream processes live, {pool.idle_now} idle, "
                             f"{sum(pool.refused.values())} starts refused"}
    out["upstreams"] = {
        "ok": not waiting,
        "detail": (f"still listing: {', '.join(waiting)}" if waiting else
                   f"{len(indexed) - len(failed)} listed"
                   + (f", failed (reported to clients): {', '.join(failed)}" if failed else "")),
    }
    if failed:  # why, in full, but without a configured value: this route takes no token
        out["upstreams"]["failures"] = {
            name: gateway.upstreams[name].redact(gateway.failures.get(name, "unknown"))[:500]
            for name in failed}
    return out
