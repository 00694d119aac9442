"""A plain 2026-07-28 `tools/call` POST answered at the edge of the SDK's Starlette app, after
the SDK's bearer check, without the SDK's middleware stack or per-request runner.

Why: a 2026-07-28 POST through the SDK's app costs the gateway its middleware stack (error,
authentication, auth context, exception and router layers, each wrapping `send` as well), a
`JSONRPCRequest` model, a per-request `ServerRunner` and middleware chain with its no-op trace
span, the runner's result copy, and a response model validated, dumped and dumped again by
`json.dumps`. A *plain* call — the one `fastpath.plain_call` answers, with no trace
context or other `_meta` beside the 2026-07-28 envelope, no tracer provider installed, no
middleware but the SDK's span and `PlainCalls` — is run by the very `PlainCalls.answer` the
middleware uses, with a context built as the SDK's entry and runner build it, and its answer
written as the SDK writes it.

The law: the lane takes a request only when every check the SDK makes before serving it passes —
and makes them by calling the SDK's own code (its `BearerAuthBackend` and the route's required
scopes, the router's match, transport security, Accept, the body limit, `json.loads`, the
routing-header duplicate check, the inbound ladder, the `Mcp-Param-*` check wherever the called
tool's schema declares a header) — so anything refused, and every other request (handshake era,
sessions, GET/DELETE, other paths, notifications, batches, any other method, a call that is not
plain), reaches the SDK's stack unchanged, with the very body messages the lane read replayed. A
taken call runs with the scope and auth context the stack would have given it; its answer is the
SDK's bytes and headers (`json.dumps` of the response, compact; NaN or a value `json.dumps` cannot
write sends it through the SDK's own response model), a handler's failure the SDK's error and
status, and the call runs in the request's own task as the SDK's JSON mode runs it (a client
that goes away does not cancel it). Pinned against the SDK path (tests/gateway/
test_gateway_http_lane*.py).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, auth_context_var
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    BearerAuthBackend,
    RequireAuthMiddleware,
)
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.runner import aclose_shielded, modern_error_data
from mcp.server.session import ServerSession
from mcp.server.streamable_http import check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    find_invalid_x_mcp_header,
    x_mcp_header_map,
)
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from byref.gateway.edge.lanes.fastpath import (
    CALL,
    ENVELOPE,
    ID_RANGE,
    REQUEST_KEYS,
    PlainCalls,
    plain_call,
    untraced,
)
from byref.gateway.wire.sdk_server import (
    OpenTelemetryMiddleware,
    _mcp_param_rejection,
    _SingleExchangeDispatchContext,
    _write,
    has_exit_callbacks,
    manager_running,
    session_manager,
)

_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")
_JSON = b"application/json"
_HEADED_KEPT = 1024
"""Declared schemas whose `x-mcp-header` annotations are remembered (a toolbox's worth)."""


class HttpLane:
    """The outermost layer of the SDK's Starlette app (its built middleware stack, wrapped):
    plain 2026-07-28 calls to the MCP route answered here, after the bearer check the SDK's
    middleware makes, made with its own backend; everything else handed to the stack unchanged."""

    def __init__(self, stack: ASGIApp, manager: StreamableHTTPSessionManager,
                 server: Server[Any], plain: PlainCalls, route: Route, before: list[BaseRoute],
                 backend: BearerAuthBackend, required_scopes: list[str]) -> None:
        self._stack = stack
        self._manager = manager
        self._server = server
        self._plain = plain
        self._route = route
        self._before = before  # routes tried before the MCP route (a request they match is theirs)
        self._backend = backend
        self._required = required_scopes
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._kept: tuple[dict[str, Any], Any] | None = None  # the last envelope and its _meta
        self._headed: dict[int, tuple[Any, bool]] = {}  # id(schema) → (schema, has x-mcp-header)
        self.taken = 0
        """Calls the lane answered (for tests)."""

    @classmethod
    def install(cls, app: Starlette, server: Server[Any], path: str) -> HttpLane | None:
        """Wrap the middleware stack of `app` (an app made by `server.streamable_http_app`, not
        yet serving) in a lane; None, and `app` unchanged, when it is not that shape: the MCP
        route at `path` behind `RequireAuthMiddleware`, the SDK's bearer and auth-context
        middleware, and a stack not built yet."""
        plain = next((m for m in server.middleware if isinstance(m, PlainCalls)), None)
        manager = session_manager(server)
        if (plain is None or not isinstance(manager, StreamableHTTPSessionManager)
                or app.middleware_stack is not None):
            return None
        kinds: list[object] = [m.cls for m in app.user_middleware]
        backend = app.user_middleware[0].kwargs.get("backend") if kinds else None
        if kinds != [AuthenticationMiddleware, AuthContextMiddleware] or not isinstance(
                backend, BearerAuthBackend):
            return None
        for at, route in enumerate(app.routes):
            guard = getattr(route, "app", None)
            if (isinstance(route, Route) and route.path == path
                    and isinstance(guard, RequireAuthMiddleware)
                    and isinstance(guard.app, StreamableHTTPASGIApp)):
                lane = cls(app.build_middleware_stack(), manager, server, plain, route,
                           app.routes[:at], backend, list(guard.required_scopes))
                app.middleware_stack = lane
                return lane
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request: here when it is a plain call, else the SDK's stack."""
        matched = self._may(scope)
        if matched is None or (user := await self._user(scope)) is None:
            await self._stack(scope, receive, send)
            return
        read: list[Message] = []
        body = await self._body(scope, receive, read)
        replay = _Replay(read, receive)
        if body is not None:
            # As the SDK's stack leaves the scope for its endpoint: the bearer check's verdict,
            # the route's match, and the user in the auth context for the call.
            scope["auth"], scope["user"] = user
            scope.setdefault("router", scope["app"].router)
            scope["route"] = self._route
            scope.update(matched)
            token = auth_context_var.set(user[1])
            try:
                if await self._serve(scope, replay, send, body):
                    return
            finally:
                auth_context_var.reset(token)
        replay.rewind()  # not taken: the stack checks again, and answers, as it always does
        await self._stack(scope, replay, send)

    async def _user(self, scope: Scope) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        """What the SDK's bearer middleware makes of the request, when `RequireAuthMiddleware`
        lets it through; None (refused, or the backend failed) for the stack to answer."""
        try:
            found = await self._backend.authenticate(HTTPConnection(scope))
        except Exception:  # its AuthenticationError is the stack's to answer (400), as the rest
            return None
        if found is None:
            return None
        credentials, user = found
        if not isinstance(user, AuthenticatedUser) or not isinstance(
                credentials, AuthCredentials) or any(
                s not in credentials.scopes for s in self._required):
            return None
        return credentials, user

    def _may(self, scope: Scope) -> Scope | None:
        """The MCP route's match (the scope keys the router adds) when the request may be one
        the lane takes, from its head alone: a POST the router sends to the MCP route, in a
        2026-07-28 version; else None."""
        if scope["type"] != "http" or scope["method"] != "POST" or not self._ready():
            return None
        match, child = self._route.matches(scope)
        if match is not Match.FULL or any(
                r.matches(scope)[0] is Match.FULL for r in self._before):
            return None
        # The header the SDK's manager routes by (its first occurrence): a 2026-07-28 version.
        version = next((v for k, v in scope["headers"] if k == _VERSION_HEADER), None)
        modern = version is not None and version.decode("latin-1") in MODERN_PROTOCOL_VERSIONS
        return child if modern else None

    def _ready(self) -> bool:
        server = self._server
        return (manager_running(self._manager)
                and self._manager.json_response
                and server.cache_hints.get(CALL) is None
                and len(server.middleware) == 2
                and isinstance(server.middleware[0], OpenTelemetryMiddleware)
                and server.middleware[1] is self._plain
                and untraced())

    async def _body(self, scope: Scope, receive: Receive, read: list[Message]) -> bytes | None:
        """The whole body within the SDK's size limit (every message kept in `read`), or None
        for the SDK to answer (too large, or the client left)."""
        limit = self._manager.max_request_body_size
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None:
            try:
                if int(length) > limit:
                    return None
            except ValueError:
                pass
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _serve(self, scope: Scope, replay: _Replay, send: Send, body: bytes) -> bool:
        """Answer the request if it is a plain call every SDK check passes; False: not taken
        (nothing sent)."""
        request = Request(scope, replay)
        if await self._security.validate_request(request, is_post=True) is not None:
            return False
        has_json, _has_sse = check_accept_headers(request)
        if not has_json:
            return False
        await request.body()  # read as the SDK's entry reads it: the handler's request is alike
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return False
        routed = self._routed(request, decoded)
        if routed is None:
            return False
        rid, params, verdict, meta = routed
        probe = types.JSONRPCRequest.model_construct(jsonrpc="2.0", id=rid, method=CALL,
                                                     params=params)
        lifespan = self._manager._lifespan_state
        if self._headers_checked(params) and await _mcp_param_rejection(
                self._server, request, probe, verdict, lifespan) is not None:
            return False
        taken = self._context(request, rid, params, verdict, meta, lifespan)
        if taken is None:
            return False
        ctx, connection, name, arguments = taken
        self.taken += 1
        try:
            try:
                out = await self._plain.answer(ctx, name, arguments)
            finally:  # as the SDK's serve_one: the connection torn down before the write
                if has_exit_callbacks(connection):
                    await aclose_shielded(connection)
        except Exception as exc:  # the SDK's entry: its mapping, its error body and status
            error = types.JSONRPCError(jsonrpc="2.0", id=rid, error=modern_error_data(exc))
            await _write(error, scope, replay, send)
            return True
        await _answer(rid, out, scope, replay, send)
        return True

    def _headers_checked(self, params: dict[str, Any]) -> bool:
        """Whether the SDK's `Mcp-Param-*` check could refuse this call: False only when the
        called tool's declared schema annotates no property with `x-mcp-header` (or annotates it
        invalidly), where the check validates nothing — known without walking the schema again
        (the walk was ~5% of the lane's time, every call). Otherwise the SDK's own check runs."""
        lookup = self._server.get_tool_input_schema
        name = params.get("name")
        if lookup is None or not isinstance(name, str):
            return True
        try:
            schema = lookup(name)
        except Exception:  # the SDK's check says what it makes of a failing lookup
            return True
        if schema is None:
            return False  # the SDK's check: no schema, nothing to validate
        found = self._headed.get(id(schema))
        if found is None or found[0] is not schema:
            if len(self._headed) >= _HEADED_KEPT:
                self._headed.clear()
            # Kept with the schema itself, so its id names it while the entry lives.
            found = self._headed[id(schema)] = (schema, find_invalid_x_mcp_header(schema) is None
                                                and bool(x_mcp_header_map(schema)))
        return found[1]

    def _routed(self, request: Request, decoded: Any) -> tuple[
            types.RequestId, dict[str, Any], Any, Any] | None:
        """(id, params, the ladder's verdict, `_meta`) of a `tools/call` the SDK's entry would
        serve, with nothing but the envelope in its `_meta`; None for the SDK's way."""
        if not isinstance(decoded, dict) or decoded.keys() != REQUEST_KEYS:
            return None
        rid, params = decoded["id"], decoded["params"]
        if (decoded["jsonrpc"] != "2.0" or decoded["method"] != CALL
                or not isinstance(params, dict)
                or not (type(rid) is str or (type(rid) is int and rid in ID_RANGE))):
            return None
        raw_meta = params.get("_meta")
        if not isinstance(raw_meta, dict) or not ENVELOPE.issuperset(raw_meta):
            return None  # a progress token, trace context, log level...: the SDK's way
        headers = request.headers
        if find_duplicated_routing_header(headers.items()) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=_first_values(request))
        if isinstance(verdict, InboundLadderRejection):
            return None
        meta = self._meta(raw_meta)
        if meta is None:
            return None
        return rid, params, verdict, meta

    def _context(self, request: Request, rid: types.RequestId, params: dict[str, Any],
                 verdict: Any, meta: Any, lifespan: Any) -> tuple[
            ServerRequestContext[Any, Any], Connection, str, dict[str, Any]] | None:
        """The call's context as the SDK's entry and runner build it, when the call is plain."""
        headers = request.headers
        connection = Connection.from_envelope(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities)
        dctx = _SingleExchangeDispatchContext(
            transport=TransportContext(kind="streamable-http", can_send_request=False,
                                       headers=headers),
            request_id=rid, message_metadata=ServerMessageMetadata(request_context=request),
            progress_token=None)
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(dctx, connection, request_meta=meta),
            lifespan_context=lifespan, method=CALL, params=params,
            request_id=rid, meta=meta, protocol_version=connection.protocol_version,
            request=request, close_sse_stream=None, close_standalone_sse_stream=None)
        plain = plain_call(ctx, connection)
        if plain is None:
            return None
        return ctx, connection, *plain

    def _meta(self, raw: dict[str, Any]) -> Any:
        """The request's `_meta` as the SDK's runner reads it (None: malformed, the SDK's to
        refuse); a client sends the same envelope every time, so the last one read is kept."""
        kept = self._kept
        if kept is not None and kept[0] == raw:
            return kept[1]
        try:
            meta = types.RequestParams.model_validate({"_meta": raw}, by_name=False).meta
        except ValidationError:
            return None
        self._kept = (json.loads(json.dumps(raw)), meta)  # a copy the client's dict cannot change
        return meta


def _first_values(request: Request) -> dict[str, str]:
    """`dict(request.headers)`, as the SDK's entry passes it (a name's first value), in one pass
    over the raw headers (starlette's mapping scans them all for every name)."""
    return {k.decode("latin-1"): v.decode("latin-1")
            for k, v in reversed(request.scope["headers"])}


class _Replay:
    """A request's `receive`: the messages the lane read, then the client's own."""

    def __init__(self, read: list[Message], receive: Receive) -> None:
        self._read = read
        self._receive = receive
        self._at = 0

    def rewind(self) -> None:
        self._at = 0

    async def __call__(self) -> Message:
        if self._at < len(self._read):
            self._at += 1
            return self._read[self._at - 1]
        return await self._receive()


async def _answer(rid: types.RequestId, out: dict[str, Any], scope: Scope, receive: Receive,
                  send: Send) -> None:
    """The SDK's success body (`_write` of a `JSONRPCResponse`), for a JSON-native result."""
    try:
        text = json.dumps({"jsonrpc": "2.0", "id": rid, "result": out}, separators=(",", ":"),
                          allow_nan=False)
    except (ValueError, TypeError):  # NaN, or not JSON: the SDK's own model says what
        await _write(types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=out), scope, receive,
                     send)
        return
    data = text.encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(data)).encode()),
                            (b"content-type", _JSON)]})
    await send({"type": "http.response.body", "body": data})

