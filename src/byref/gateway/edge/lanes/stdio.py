"""A plain `tools/call` on the stdio server edge, taken off the line and answered without the SDK's
server loop.

Why: behind byref's own stdio streams (`stdio_transport`) the SDK's loop still costs every request
a pydantic parse of the line, a relay task and memory stream (the era replay), a dispatch context,
a per-request `ServerRunner` and `Connection` teardown, the middleware chain, a no-op trace span,
and a response model built and dumped — about a quarter of the gateway's time per proxied call. A
*plain* call — the one `fastpath.plain_call` answers, on a connection whose era the SDK's loop has
already chosen, with no progress token, trace context or other `_meta` beside the 2026-07-28
envelope, no tracer provider installed and no middleware but the SDK's span and `PlainCalls` — is
read with pydantic's JSON parser (the SDK's, without the message model), run in a task of its own
by the very `PlainCalls.answer` the middleware uses, and answered as one line.

The law: the lane takes a line only when the SDK would have run it through `PlainCalls` too, and
then the client cannot tell: the answer is the SDK's bytes (`pydantic_core.to_json`, NaN as null,
as the SDK's response model dumps), an error is the SDK's error (the same mapping for each era),
a `notifications/cancelled` for a lane call cancels it and it is never answered, a call still
running at end of input is answered `CONNECTION_CLOSED` (shielded, bounded, before the SDK's
teardown closes the writer), the handler sees a context built as the SDK's runner builds it (the
era's `Connection`, a `ServerSession` whose back-channel, `stdio_context`, is the SDK's dispatcher
on a handshake connection and notify-only on a 2026-07-28 one). Every other line, and every line
before the SDK's loop has served a request, goes to the SDK unchanged (pinned against the SDK
path, tests/gateway/edge/test_gateway_lane*.py).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
import sniffio
from mcp.server.connection import Connection, NotifyOnlyOutbound
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.runner import aclose_shielded, modern_error_data
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from byref.gateway.edge.lanes.fastpath import (
    CALL,
    ENVELOPE,
    ID_RANGE,
    REQUEST_KEYS,
    PlainCalls,
    plain_call,
    untraced,
)
from byref.gateway.edge.lanes.stdio_context import CallContext, Notifier
from byref.gateway.wire.stdio import MessageReader, MessageWriter

logger = logging.getLogger(__name__)

CANCELLED = "notifications/cancelled"
SHUTDOWN_WRITE_TIMEOUT = 1.0
"""Seconds a call cut off by end of input may take to write its error (the SDK's bound)."""


class _Flight:
    __slots__ = ("dctx", "scope")

    def __init__(self, dctx: CallContext) -> None:
        self.dctx = dctx
        self.scope = anyio.CancelScope()


class StdioLane:
    """The plain calls of one stdio connection, taken off its reader and answered on its writer."""

    def __init__(self, server: Server[Any], plain: PlainCalls, writer: MessageWriter) -> None:
        self._server = server
        self._plain = plain
        self._writer = writer
        self._notifier = Notifier(writer)
        self._modern_outbound = NotifyOnlyOutbound(self._notifier)
        self._era: str | None = None  # "legacy" or "modern", once the SDK's loop served one
        self._loop_connection: Connection | None = None
        self._lifespan: Any = None
        self._kept: tuple[dict[str, Any], str, Any, Any, Any] | None = None
        self._flights: dict[types.RequestId, _Flight] = {}
        self._tasks: set[asyncio.Task[None]] | None = None  # while serving: the running calls
        self._running = 0
        self._idle = anyio.Event()
        self._idle.set()

    @classmethod
    def attach(cls, server: Server[Any], read: object, write: object) -> StdioLane | None:
        """A lane on byref's own stdio streams for `server` (told of the SDK's requests by its
        `PlainCalls`), or None when the streams or the server are not those."""
        plain = next((m for m in server.middleware if isinstance(m, PlainCalls)), None)
        if plain is None or not isinstance(read, MessageReader) or not isinstance(
                write, MessageWriter) or sniffio.current_async_library() != "asyncio":
            return None
        lane = cls(server, plain, write)
        plain.seen = lane.seen
        read.screen(lane.take, lane.drain)
        return lane

    def seen(self, ctx: ServerRequestContext[Any, Any], connection: Connection | None) -> None:
        """A request the SDK's loop serves: the era it chose, its connection and lifespan."""
        if self._era is not None or connection is None:
            return
        self._lifespan = ctx.lifespan_context
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self._era = "modern"
        else:
            self._loop_connection, self._era = connection, "legacy"

    async def run(self, serve: Callable[[], Awaitable[None]]) -> None:
        """Run `serve` (the SDK's loop) with the lane's calls beside it; calls still running when
        it ends are cancelled and waited for (as a task group would)."""
        tasks = self._tasks = set()
        try:
            await serve()
        finally:
            self._tasks = None
            for task in tasks:
                task.cancel()
            if tasks:
                with anyio.CancelScope(shield=True):
                    await asyncio.gather(*tasks, return_exceptions=True)

    def take(self, line: str) -> bool:
        """Whether `line` is a plain call the lane now runs (False: the SDK's, unchanged)."""
        if self._era is None or self._tasks is None or (
                '"tools/call"' not in line and '"notifications/cancelled"' not in line):
            return False
        try:  # the parser under the SDK's validate_json: the same lines parse, to the same values
            message = pydantic_core.from_json(line, cache_strings="keys")
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        if message.get("method") == CANCELLED and "id" not in message:
            self._cancelled(message.get("params"))
            return False  # the SDK sees it too (its own table has no such id)
        started = self._context(message)
        if started is None:
            return False
        ctx, connection, dctx, name, arguments = started
        flight = self._flights[coerce_request_id(dctx.request_id)] = _Flight(dctx)
        if not self._running:
            self._idle = anyio.Event()
        self._running += 1
        # A bare asyncio task (not a task group's): a third of the cost, kept in `_tasks`.
        task = asyncio.get_running_loop().create_task(
            self._call(ctx, connection, flight, name, arguments))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def drain(self) -> None:
        """End of input: every running call is cancelled and answered `CONNECTION_CLOSED` (as
        the SDK's loop answers its own), before the SDK's teardown closes the writer."""
        for flight in list(self._flights.values()):
            flight.scope.cancel()
        with anyio.move_on_after(SHUTDOWN_WRITE_TIMEOUT + 1, shield=True):
            await self._idle.wait()

    def _cancelled(self, params: Any) -> None:
        rid = params.get("requestId") if isinstance(params, dict) else None
        if isinstance(rid, bool) or not isinstance(rid, int | str):
            return
        flight = self._flights.get(coerce_request_id(rid))
        if flight is not None:  # the SDK's "interrupt" mode: flag it and stop the handler
            flight.dctx.cancel()
            flight.scope.cancel()

    def _context(self, message: dict[str, Any]) -> tuple[
            ServerRequestContext[Any, Any], Connection, CallContext, str, dict[str, Any]] | None:
        """The request's context as the SDK's runner would build it, when the call is plain."""
        rid, params = message.get("id"), message.get("params")
        if (message.keys() != REQUEST_KEYS or message["jsonrpc"] != "2.0"
                or message["method"] != CALL or not isinstance(params, dict)):
            return None
        if not (type(rid) is str or (type(rid) is int and rid in ID_RANGE)):
            return None
        if coerce_request_id(rid) in self._flights:
            return None  # a duplicate id: the SDK's (blind-overwrite) rules
        if (self._server.cache_hints.get(CALL) is not None or len(self._server.middleware) != 2
                or self._server.middleware[-1] is not self._plain or not untraced()):
            return None
        raw_meta = params.get("_meta")
        if self._era == "legacy":
            if "_meta" in params or (connection := self._loop_connection) is None:
                return None
            version, meta, requests = connection.protocol_version, None, connection
        elif self._era == "modern":
            if not isinstance(raw_meta, dict) or not ENVELOPE.issuperset(raw_meta):
                return None
            connection, version, meta = self._envelope(raw_meta, params)
            if connection is None:
                return None
            requests = None
        else:
            return None  # the SDK's loop has not chosen its era yet
        dctx = CallContext(rid, self._notifier, requests)
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(dctx, connection, request_meta=meta),
            lifespan_context=self._lifespan, method=CALL, params=params, request_id=rid,
            meta=meta, protocol_version=version)
        plain = plain_call(ctx, connection)
        if plain is None:
            return None
        return ctx, connection, dctx, *plain

    def _envelope(self, raw: dict[str, Any], params: dict[str, Any]
                  ) -> tuple[Connection | None, str, Any]:
        """A 2026-07-28 request's connection, version and `_meta` as the SDK's loop reads its
        envelope (None: the SDK's to refuse). A client sends the same envelope every time, so
        what was read of the last one is kept and reused while the next one equals it."""
        kept = self._kept
        if kept is None or kept[0] != raw:
            route = classify_inbound_request({"method": CALL, "params": params})
            if isinstance(route, InboundLadderRejection):
                return None, "", None
            try:
                meta = types.RequestParams.model_validate({"_meta": raw}, by_name=False).meta
            except ValidationError:
                return None, "", None
            connection = Connection.from_envelope(
                route.protocol_version, route.client_info, route.client_capabilities,
                outbound=self._modern_outbound)
            self._kept = kept = (copy.deepcopy(raw), route.protocol_version, meta,
                                 connection.client_params, connection.client_capabilities)
            return connection, route.protocol_version, meta
        _raw, version, meta, client_params, capabilities = kept
        # `Connection.from_envelope` on the envelope read before: born ready, the same identity.
        connection = Connection(self._modern_outbound, protocol_version=version,
                                client_params=client_params)
        connection.client_capabilities = capabilities
        connection.initialized.set()
        return connection, version, meta

    async def _call(self, ctx: ServerRequestContext[Any, Any], connection: Connection,
                    flight: _Flight, name: str, arguments: dict[str, Any]) -> None:
        """One call as the SDK's dispatcher runs a request: answered once, or not at all when
        the client cancelled it; cut off by end of input, answered `CONNECTION_CLOSED`."""
        dctx, rid = flight.dctx, flight.dctx.request_id
        written = False
        try:
            with flight.scope:
                try:
                    out = await self._plain.answer(ctx, name, arguments)
                finally:
                    dctx.close()
                    self._flights.pop(coerce_request_id(rid), None)
                if not dctx.cancelled:
                    written = True  # a started write counts as sent: never two answers
                    await self._answer(rid, out)
            if flight.scope.cancelled_caught and not written:
                await self._closed(dctx)
        except anyio.get_cancelled_exc_class():
            if not written:
                await self._closed(dctx)
            raise
        except Exception as exc:
            if not dctx.cancelled:
                await self._error(rid, self._error_data(exc))
        finally:
            if self._era == "modern":  # the SDK's per-request connection teardown, after the
                await aclose_shielded(connection)  # answer: nothing in it reaches the client
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def _closed(self, dctx: CallContext) -> None:
        if dctx.cancelled:
            return  # the client cancelled it: never answered
        with anyio.move_on_after(SHUTDOWN_WRITE_TIMEOUT, shield=True):
            await self._error(dctx.request_id, types.ErrorData(
                code=types.CONNECTION_CLOSED, message="Connection closed"))

    def _error_data(self, exc: Exception) -> types.ErrorData:
        if self._era == "modern" and not isinstance(exc, MCPError | ValidationError):
            return modern_error_data(exc)  # logged; a generic INTERNAL_ERROR on the wire
        error = handler_exception_to_error_data(exc)
        if error is None:
            logger.exception("handler for %r raised", CALL)
            error = types.ErrorData(code=0, message=str(exc))  # the SDK's handshake-era code
        return error

    async def _answer(self, rid: types.RequestId, out: dict[str, Any]) -> None:
        try:
            line = pydantic_core.to_json({"jsonrpc": "2.0", "id": rid, "result": out},
                                         inf_nan_mode="null")
        except pydantic_core.PydanticSerializationError:  # the SDK's own dump says what
            await self._send(types.JSONRPCResponse(jsonrpc="2.0", id=rid, result=out))
            return
        try:
            await self._writer.send_json(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped result for %r: write stream closed", rid)

    async def _error(self, rid: types.RequestId, error: types.ErrorData) -> None:
        await self._send(types.JSONRPCError(jsonrpc="2.0", id=rid, error=error))

    async def _send(self, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        try:
            await self._writer.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped answer for %r: write stream closed", message.id)
