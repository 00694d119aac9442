"""The `mcp` SDK's server internals the gateway relies on, in one place.

Owns every private `mcp.*` import and every read of an SDK object's private attribute on the server
edge: the stream protocols, the SDK's claim of fds 0 and 1, a request's connection, the HTTP entry
internals the HTTP lane reuses, and the manager and exit-stack state it checks. The law: nothing
else in `byref.gateway` imports a private SDK module or reads an SDK object's private attribute; an
SDK release that moves one the lanes need leaves `lane_gaps()` non-empty, the gateway names it in
one operator line at start and serves every request through the SDK's own path.
"""

from __future__ import annotations

from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared._stream_protocols import ReadStream, WriteStream

_HTTP_GAP: str | None = None
try:  # the HTTP entry internals the HTTP lane makes its checks with, as the SDK's entry does
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp.server._streamable_http_modern import (
        _mcp_param_rejection,
        _SingleExchangeDispatchContext,
        _write,
        handle_modern_request,
    )
except ImportError as exc:  # an SDK release that moved them: the HTTP lane stays off
    _HTTP_GAP = f"{exc.name or 'mcp.server'} ({exc})"


try:  # the SDK's own claim of fds 0 and 1, reused so byref's stdio streams divert exactly so
    from mcp.server.stdio import (
        _claim_fd,
        _open_stdin_diversion,
        _open_stdout_diversion,
        _UnownedTextWrapper,
    )
except ImportError:  # pragma: no cover - an SDK that moved them: stdio served as the SDK does
    STDIO_CLAIMS = False
else:
    STDIO_CLAIMS = True


def lane_gaps() -> dict[str, str]:
    """Lanes this SDK release cannot run, each with the internal it lacks (empty when all can)."""
    return {} if _HTTP_GAP is None else {"http": _HTTP_GAP}


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """A request's connection itself, not the per-request session that wraps it (the SDK's
    context exposes no accessor)."""
    found = getattr(ctx.session, "_connection", None)
    return found if isinstance(found, Connection) else None


def session_manager(server: object) -> object | None:
    """The streamable HTTP session manager `streamable_http_app` left on the server."""
    return getattr(server, "_session_manager", None)


def manager_running(manager: object) -> bool:
    """Whether the session manager's task group is up (its `run()` has entered)."""
    return getattr(manager, "_task_group", None) is not None


def manager_entry(manager: object) -> Any:
    """The session manager's own request handler (what its ASGI app hands a request to)."""
    return getattr(manager, "_handle_request", None)


def manager_lifespan(manager: object) -> Any:
    """The lifespan state the manager's 2026-07-28 entry runs each request with."""
    return getattr(manager, "_lifespan_state", None)


def session_transports(manager: object) -> list[Any]:
    """The handshake-era sessions' transports a session manager holds (to close their streams
    at a graceful stop)."""
    return list(getattr(manager, "_server_instances", {}).values())


def has_exit_callbacks(connection: Connection) -> bool:
    """Whether anything was pushed on a connection's exit stack (an empty one unwinds to nothing;
    unknown → True, so it is unwound)."""
    return bool(getattr(connection.exit_stack, "_exit_callbacks", True))


__all__ = [
    "STDIO_CLAIMS",
    "OpenTelemetryMiddleware",
    "ReadStream",
    "WriteStream",
    "_SingleExchangeDispatchContext",
    "_UnownedTextWrapper",
    "_claim_fd",
    "_mcp_param_rejection",
    "_open_stdin_diversion",
    "_open_stdout_diversion",
    "_write",
    "connection_of",
    "handle_modern_request",
    "has_exit_callbacks",
    "lane_gaps",
    "manager_entry",
    "manager_lifespan",
    "manager_running",
    "session_manager",
    "session_transports",
]
