"""A 2026-07-28 request that asked for logs or progress is answered on a stream over HTTP.

Why: the gateway answers HTTP requests with one JSON body (`http_app`: a stream per request costs
~15%), and a 2026-07-28 request has no other channel — its log lines and progress may ride only
the stream carrying its response, so in JSON mode the SDK drops them and an upstream's logs never
reached a 2026-07-28 client over HTTP. A request whose `_meta` opts in to logs (the reserved
log-level key) or names a progress token, from a client that accepts `text/event-stream`, is
served by the SDK's own 2026-07-28 entry in its streaming mode instead: it still answers with one
JSON body when nothing is sent before the result, and commits to a stream at the first
notification.

The law: only the SDK's manager entry is wrapped (after its body-size limit, which hands on the
body whole), every other request reaches it unchanged, and the choice is made from the request's
own envelope, never from its content.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from byref.gateway.upstream.relay import LOG_LEVEL_META
from byref.gateway.wire.sdk_server import handle_modern_request, manager_entry, manager_lifespan

_VERSION = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")
_STREAMED_META = (LOG_LEVEL_META, "progressToken")


def stream_opted(manager: StreamableHTTPSessionManager) -> bool:
    """Wrap `manager`'s entry so an opted-in 2026-07-28 request is streamed; False (nothing
    changed) when the manager is not the shape this wraps (then such requests are answered with
    JSON, as before)."""
    inner = getattr(manager, "asgi_app", None)
    handle = manager_entry(manager)
    if not isinstance(inner, RequestBodyLimitMiddleware) or handle is None or \
            not manager.json_response:
        return False

    async def entry(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or not _modern(scope) \
                or not _accepts_stream(scope):
            await handle(scope, receive, send)
            return
        first = await receive()
        replay = _Replay(first, receive)
        if first.get("type") == "http.request" and not first.get("more_body", False) and \
                _opted_in(first.get("body", b"")):
            await handle_modern_request(manager.app, manager.security_settings, False,
                                        manager_lifespan(manager), scope, replay, send)
            return
        await handle(scope, replay, send)

    manager.asgi_app = RequestBodyLimitMiddleware(entry, inner.max_body_size)
    return True


def _modern(scope: Scope) -> bool:
    version = next((v for k, v in scope["headers"] if k == _VERSION), None)
    return version is not None and version.decode("latin-1") in MODERN_PROTOCOL_VERSIONS


def _accepts_stream(scope: Scope) -> bool:
    return any(k == b"accept" and b"text/event-stream" in v for k, v in scope["headers"])


def _opted_in(body: bytes) -> bool:
    """Whether a request's `_meta` asks for logs or progress (anything unreadable: no)."""
    try:
        decoded: Any = json.loads(body)
    except (ValueError, RecursionError):
        return False
    params = decoded.get("params") if isinstance(decoded, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and any(k in meta for k in _STREAMED_META)


class _Replay:
    """A request's `receive`: the message already read, then the client's own."""

    def __init__(self, first: Message, receive: Receive) -> None:
        self._first: Message | None = first
        self._receive = receive

    async def __call__(self) -> Message:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return await self._receive()
