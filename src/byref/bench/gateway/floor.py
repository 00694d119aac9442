"""The SDK floor `byref bench gateway` times beside the gateway: the least proxy the SDK makes.

    python -m byref.bench.gateway.floor      # stdio, in front of the bench upstream

A low-level `mcp` Server on the SDK's own `stdio_server` whose `tools/list` and `tools/call`
forward, unchanged, through one `mcp` Client to the bench upstream (`upstream`, over
stdio in the handshake generation, as the gateway speaks to its upstreams). No byref code runs in
it: no transcript, no refs, no dispatch. Its ratio to the direct call is what any proxy built on
the SDK pays for a second server edge and a second client edge — the part of the gateway's ratio
byref's own code cannot take away while both edges are the SDK's.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from byref.bench.gateway.rig import upstream_stdio


async def serve() -> None:
    """Serve the floor proxy on stdin/stdout until the client leaves."""
    async with Client(upstream_stdio("floor"), cache=None, mode="legacy") as upstream:

        async def list_tools(_ctx: Any, params: types.PaginatedRequestParams | None
                             ) -> types.ListToolsResult:
            return await upstream.list_tools(cursor=params.cursor if params else None)

        async def call_tool(_ctx: Any, params: types.CallToolRequestParams
                            ) -> types.CallToolResult:
            return await upstream.call_tool(params.name, params.arguments or {})

        server: Server[Any] = Server("byref-bench-floor", on_list_tools=list_tools,
                                     on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
