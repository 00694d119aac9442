"""What a connection to an upstream is opened on, and what the gateway offers the server there.

Owns the transport an entry names (`target`): a server in this process (connected in memory by
the SDK's `Client`), SSE, streamable HTTP, or a process the gateway starts (`spawn`); and the
client side every upstream is offered (`offered`): sampling, elicitation and roots, answered by
the calling client (`relay`), and its log messages. The law: a stdio server's stderr goes where
the operator sees it, never to stdout (which carries the gateway's own protocol over stdio); a
streamable HTTP answer is bounded only to guard memory (`UPSTREAM_EVENT_BYTES`).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

import mcp_types as types
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from byref.gateway.config.servers import ServerConfig
from byref.gateway.upstream.instance.spawn import Spawned, stdio_process
from byref.gateway.upstream.relay import Relay
from byref.gateway.wire.sdk_client import create_mcp_http_client

UPSTREAM_EVENT_BYTES = 1 << 30
"""The largest single answer (one SSE event) read from a streamable HTTP upstream. The SDK's
default, 1 MiB, made a server's larger result look like a lost connection; a gateway exists to
take such results below the context, so the bound only guards memory."""


def target(c: ServerConfig, spawned: Spawned | None, errlog: TextIO | None,
           on_response: Callable[[Any], Awaitable[None]]) -> Any:
    """What the SDK's `Client` connects to for entry `c` (`on_response`: told of each HTTP
    response of a streamable HTTP server; `spawned`: the stdio process's record)."""
    if c.server is not None:  # in this process: the SDK's Client connects it in memory
        return c.server
    if c.transport == "sse":
        assert c.url is not None
        return sse_client(c.url, headers=c.headers or None, timeout=c.timeout)
    if c.url is not None:
        http = create_mcp_http_client(headers=c.headers or None)
        http.event_hooks["response"].append(on_response)
        return streamable_http_client(c.url, http_client=http,
                                      max_sse_event_size=UPSTREAM_EVENT_BYTES)
    assert c.command is not None
    # The server's stderr goes where the gateway operator will see it (never to stdout,
    # which carries the gateway's own protocol over stdio).
    errlog = errlog if errlog is not None else sys.stderr
    params = StdioServerParameters(command=c.command, args=list(c.args), env=c.env or None,
                                   cwd=c.cwd)
    if sys.platform == "win32" or spawned is None:  # pragma: no cover
        return stdio_client(params, errlog=errlog)
    return stdio_process(params, spawned, errlog=errlog)


def offered(relay: Relay) -> dict[str, Any]:
    """What the gateway offers the server: sampling, elicitation and roots (answered by the
    calling client, `relay`), its log messages (forwarded naming the server), and the
    `dev.byref/refs` extension (a server that has it places large results itself and announces
    their refs, which the gateway then passes through: `catalog.proxy`)."""
    from mcp.client import advertise

    from byref.extension.protocol import IDENTIFIER

    async def sampling(_: Any, params: types.CreateMessageRequestParams) -> Any:
        kind = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return await relay.forward(types.CreateMessageRequest(params=params), kind)

    async def elicitation(_: Any, params: types.ElicitRequestParams) -> Any:
        return await relay.forward(types.ElicitRequest(params=params), types.ElicitResult)

    async def roots(_: Any) -> Any:
        return await relay.forward(types.ListRootsRequest(), types.ListRootsResult)

    return {"sampling_callback": sampling, "elicitation_callback": elicitation,
            "list_roots_callback": roots, "logging_callback": relay.log,
            "extensions": [advertise(IDENTIFIER, {})],
            "sampling_capabilities": types.SamplingCapability(
                tools=types.SamplingToolsCapability())}
