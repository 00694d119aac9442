"""The back-channel of one stdio lane call: the dispatch context its handler sees while it runs.

Why: a call the lane (`stdio`) takes off the line never reaches the SDK's dispatcher, yet its
handler asks its context what the SDK's would answer — may it ask the client something, was it
cancelled, where do its notifications go. `CallContext` is that `DispatchContext` for one call,
and `Notifier` the dispatcher's `notify` written straight to the pipe.

The law: the handler cannot tell it from the SDK's: the same transport context (duplex on a
handshake connection, notify-only on a 2026-07-28 one), a request to the client goes through the
SDK's own dispatcher (which matches its answer) and only while the call runs on a handshake
connection (else `NoBackChannelError`, as the SDK's), a notification after the call ended is
dropped (as the SDK's), and a write to a closed pipe is logged, never raised.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import SessionMessage
from mcp.shared.transport_context import TransportContext

from byref.gateway.wire.stdio import MessageWriter

logger = logging.getLogger("byref.gateway.edge.lanes.stdio")

# As the SDK's dispatcher builds it for a stdio message (a 2026-07-28 one masks the flag off).
_DUPLEX = TransportContext(kind="jsonrpc", can_send_request=True)
_NOTIFY_ONLY = TransportContext(kind="jsonrpc", can_send_request=False)


class Notifier:
    """The dispatcher's `notify`, written straight to the pipe (a dropped write is only logged)."""

    def __init__(self, writer: MessageWriter) -> None:
        self._writer = writer

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        """Never a request: one goes through the SDK's dispatcher (`CallContext`) or nowhere."""
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None,
                     opts: CallOptions | None = None) -> None:
        """`method` as a JSON-RPC notification on the pipe."""
        message = (types.JSONRPCNotification(jsonrpc="2.0", method=method, params=dict(params))
                   if params is not None else types.JSONRPCNotification(jsonrpc="2.0",
                                                                         method=method))
        try:
            await self._writer.send(SessionMessage(message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("dropped %s: write stream closed", method)


class CallContext:
    """The `DispatchContext` of one lane call: its back-channel while it runs."""

    message_metadata = None

    def __init__(self, request_id: types.RequestId, notifier: Notifier,
                 requests: Connection | None) -> None:
        self._request_id = request_id
        self._notifier = notifier
        self._requests = requests  # the handshake loop's connection: the SDK's dispatcher
        self._closed = False
        self.transport = _DUPLEX if requests is not None else _NOTIFY_ONLY
        self.cancelled = False
        self._event: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Set when the client cancels the call (made when first asked for: rarely)."""
        if self._event is None:
            self._event = anyio.Event()
            if self.cancelled:
                self._event.set()
        return self._event

    def cancel(self) -> None:
        """The client sent `notifications/cancelled` for this call."""
        self.cancelled = True
        if self._event is not None:
            self._event.set()

    @property
    def request_id(self) -> types.RequestId:
        """The call's JSON-RPC id."""
        return self._request_id

    @property
    def can_send_request(self) -> bool:
        """Whether the client may be asked something now (handshake era, call running)."""
        return self._requests is not None and not self._closed

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None,
                               opts: CallOptions | None = None) -> dict[str, Any]:
        """Ask the client through the SDK's dispatcher, which matches its answer."""
        if self._requests is None or self._closed:
            raise NoBackChannelError(method)
        return await self._requests.outbound.send_raw_request(method, params, opts)

    async def notify(self, method: str, params: Mapping[str, Any] | None,
                     opts: CallOptions | None = None) -> None:
        """A notification on the pipe while the call runs (dropped after, as the SDK's)."""
        if self._closed:
            logger.debug("dropped %s: dispatch context closed", method)
            return
        await self._notifier.notify(method, params, opts)

    async def progress(self, progress: float, total: float | None = None,
                       message: str | None = None) -> None:
        """No progress token: nothing to report (a call with one goes the SDK's way)."""
        return None

    def close(self) -> None:
        """The call is done: its back-channel closes."""
        self._closed = True
