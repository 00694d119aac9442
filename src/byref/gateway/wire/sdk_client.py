"""The `mcp` SDK's client internals the gateway relies on, in one place.

Owns every private `mcp.*` import on the upstream side (the transport stream pair a client
transport yields, the SDK's configured HTTP client), every read of a private attribute of an SDK
object there, and the SDK's own words the gateway recognises. The law: nothing else in
`byref.gateway.upstream` imports a private SDK module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcp.client._transport import TransportStreams
from mcp.shared._httpx_utils import create_mcp_http_client

HTTP_ERROR_STANDIN = "Server returned an error response"
"""What the SDK's streamable HTTP client answers a request with when the server's HTTP status is
4xx/5xx (not 404) without a JSON-RPC error in the body: the status itself is not in it."""


def asyncio_writer(send: Callable[..., Any]) -> asyncio.StreamWriter | None:
    """The asyncio stream under an anyio process stdin's `send`, if that is what `send` is
    (anyio keeps it private)."""
    stream = getattr(getattr(send, "__self__", None), "_stream", None)
    ok = isinstance(stream, asyncio.StreamWriter) and getattr(send, "__name__", "") == "send"
    return stream if ok else None


__all__ = ["HTTP_ERROR_STANDIN", "TransportStreams", "asyncio_writer",
           "create_mcp_http_client"]
