"""The `mcp` SDK's client internals the gateway relies on, in one place.

Owns every private `mcp.*` import on the upstream side (the transport stream pair a client
transport yields, the SDK's configured HTTP client) and every read of a private attribute of an
SDK object there. The law: nothing else in `byref.gateway.upstream` imports a private SDK module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcp.client._transport import TransportStreams
from mcp.shared._httpx_utils import create_mcp_http_client


def asyncio_writer(send: Callable[..., Any]) -> asyncio.StreamWriter | None:
    """The asyncio stream under an anyio process stdin's `send`, if that is what `send` is
    (anyio keeps it private)."""
    stream = getattr(getattr(send, "__self__", None), "_stream", None)
    ok = isinstance(stream, asyncio.StreamWriter) and getattr(send, "__name__", "") == "send"
    return stream if ok else None


__all__ = ["TransportStreams", "asyncio_writer", "create_mcp_http_client"]
