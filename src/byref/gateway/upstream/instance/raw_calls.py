"""Plain `tools/call` requests on a stdio upstream's pipes, written and matched by byref itself.

Why this hand-writes part of what the SDK's `ClientSession` does: each call on the SDK's request
path pays a request model built and dumped, the dispatcher's stream hop, a pending-response
stream and three result validations (docs/NOTES.md#raw-calls). Here a *plain* call (no progress
token, no forwarded `_meta`, no trace context, a handshake-era connection) is one JSON line
written through the connection's own `MessageWriter`, its response taken off its own
`MessageReader` by id, and its result validated as the SDK validates it (the negotiated
version's result surface, one `CallToolResult.model_validate`, the output schema through the
session's public `validate_tool_result`).

The law: ids are the negative integers -1, -2, …, which the SDK's dispatcher (it counts up from 1)
never mints (integers: pydantic caches the short strings it parses); a line is taken only when it
parsed as the SDK's reader parses it into a response or error whose id is one waiting here.
Everything else (the server's requests, notifications, responses to the SDK's ids, a late answer,
a line that is not JSON-RPC) reaches the SDK's session exactly as before. A waiting call ends as
the SDK's would: an error response is `MCPError(code, message, data)`; the pipe's end is
`MCPError(CONNECTION_CLOSED, "Connection closed")` for every waiting and later call; a caller
that gives up sends the SDK's courtesy `notifications/cancelled`, shielded and bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from functools import cache
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pydantic_core
import sniffio
from mcp import Client
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import methods
from mcp_types.version import KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    get_current_span,
    get_tracer_provider,
)
from pydantic import BaseModel

from byref.gateway.wire.stdio import MessageWriter

ABANDON_WRITE_TIMEOUT = 5.0
"""Seconds the courtesy cancel of an abandoned call may take to write (the SDK's bound)."""
_CLOSED = "Connection closed"


class _Waiter:
    """One call's answer to come: on asyncio a bare future (an anyio Event costs ~3x as much to
    make, set and wait on), elsewhere an anyio Event."""

    __slots__ = ("done", "outcome")

    def __init__(self, done: asyncio.Future[None] | anyio.Event) -> None:
        self.done = done
        self.outcome: dict[str, Any] | MCPError | None = None

    def settle(self, outcome: dict[str, Any] | MCPError) -> None:
        self.outcome = outcome
        done = self.done
        if isinstance(done, asyncio.Future):
            if not done.done():  # a caller that gave up cancelled it
                done.set_result(None)
        else:
            done.set()

    async def wait(self) -> None:
        done = self.done
        if isinstance(done, asyncio.Future):
            await done
        else:
            await done.wait()


class RawCalls:
    """The calls byref itself has in flight on one stdio connection, by id."""

    def __init__(self, writer: MessageWriter) -> None:
        self._writer = writer
        self._waiting: dict[int, _Waiter] = {}
        self._count = 0
        self._closed = False
        self._loop = _asyncio_loop()

    @property
    def open(self) -> bool:
        """Whether the connection's pipes still carry calls."""
        return not self._closed

    def claim(self, item: SessionMessage) -> bool:
        """Hand `item` to the call waiting for it and say so; False leaves it to the session."""
        message = item.message
        if isinstance(message, types.JSONRPCResponse):
            outcome: dict[str, Any] | MCPError = message.result
        elif isinstance(message, types.JSONRPCError):
            error = message.error
            outcome = MCPError(code=error.code, message=error.message, data=error.data)
        else:
            return False
        key = message.id
        if isinstance(key, str):  # the SDK's correlation: "-7" and -7 are one id
            key = coerce_request_id(key)
        waiter = self._waiting.pop(key, None) if isinstance(key, int) and key < 0 else None
        if waiter is None:
            return False
        waiter.settle(outcome)
        return True

    def close(self) -> None:
        """The pipe ended: every waiting call, and every later one, fails as the SDK's do."""
        self._closed = True
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            waiter.settle(MCPError(code=types.CONNECTION_CLOSED, message=_CLOSED))

    async def request(self, line: str, request_id: int) -> dict[str, Any]:
        """Write `line` (a request with `request_id`) and wait for its result; raises MCPError."""
        if self._closed:
            raise MCPError(code=types.CONNECTION_CLOSED, message=_CLOSED)
        waiter = self._waiting[request_id] = _Waiter(
            anyio.Event() if self._loop is None else self._loop.create_future())
        written = False
        try:
            await anyio.lowlevel.checkpoint_if_cancelled()
            written = True  # as the SDK: a started write counts as issued
            try:
                await self._writer.send_line(line)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                raise MCPError(code=types.CONNECTION_CLOSED, message=_CLOSED) from None
            await waiter.wait()
        except anyio.get_cancelled_exc_class():
            if written and not self._closed:
                await self._cancel(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
        outcome = waiter.outcome
        if isinstance(outcome, MCPError):
            raise outcome
        assert outcome is not None
        return outcome

    def next_id(self) -> int:
        """A fresh id from byref's own space (negative: the SDK's count up from 1)."""
        self._count += 1
        return -self._count

    async def _cancel(self, request_id: int) -> None:
        line = json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "caller cancelled"}},
                          separators=(",", ":"))
        with anyio.CancelScope(shield=True), anyio.move_on_after(ABANDON_WRITE_TIMEOUT), \
                contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._writer.send_line(line)


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop, or None (another backend, or none running)."""
    try:
        return (asyncio.get_running_loop()
                if sniffio.current_async_library() == "asyncio" else None)
    except (sniffio.AsyncLibraryNotFoundError, RuntimeError):
        return None


def plain(client: Client) -> bool:
    """Whether a call on `client` may skip the SDK's request path: a handshake-era connection and
    no trace context the SDK would send (no tracer provider installed, no valid current span)."""
    return (client.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and isinstance(get_tracer_provider(), ProxyTracerProvider | NoOpTracerProvider)
            and not get_current_span().get_span_context().is_valid)


async def call_tool(raw: RawCalls, client: Client, name: str,
                    arguments: dict[str, Any]) -> types.CallToolResult | None:
    """`client.call_tool(name, arguments)` over `raw`; None (nothing sent) when the arguments do
    not serialize (the SDK's path then says why)."""
    request_id = raw.next_id()
    try:  # as the SDK's writer dumps it (NaN and infinities as null)
        line = pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                      "params": {"name": name, "arguments": arguments}},
                                     inf_nan_mode="null").decode("utf-8")
    except (pydantic_core.PydanticSerializationError, UnicodeDecodeError):
        return None
    result = await raw.request(line, request_id)
    version = client.protocol_version or "2025-11-25"
    with contextlib.suppress(KeyError):
        methods.validate_server_result("tools/call", version, result)
    if not (foreign := _later_fields(version)).isdisjoint(result):
        result = {key: value for key, value in result.items() if key not in foreign}
    value = types.CallToolResult.model_validate(result, by_name=False)
    if not value.is_error:
        await client.session.validate_tool_result(name, value)
    return value


@cache
def _later_fields(version: str) -> frozenset[str]:
    """`tools/call` result keys a later revision declares and `version` does not (the SDK drops
    them before validating: outside the negotiated contract)."""
    current = methods.SERVER_RESULTS.get(("tools/call", version))
    if current is None or version not in KNOWN_PROTOCOL_VERSIONS:
        return frozenset()
    later: set[str] = set()
    for revision in KNOWN_PROTOCOL_VERSIONS[KNOWN_PROTOCOL_VERSIONS.index(version) + 1:]:
        row = methods.SERVER_RESULTS.get(("tools/call", revision))
        if row is not None:
            later |= _wire_fields(row)
    return frozenset(later) - _wire_fields(current)


def _wire_fields(target: Any) -> frozenset[str]:
    members = getattr(target, "__args__", (target,))
    fields: set[str] = set()
    for model in members:
        if isinstance(model, type) and issubclass(model, BaseModel):
            fields.update(f.alias or n for n, f in model.model_fields.items())
    return frozenset(fields)
