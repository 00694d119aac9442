"""The MCP gateway: byref's economics for every MCP client, with one config file.

Owns `byref gateway`: it sits between any MCP client and the user's MCP servers (configured with
the `mcpServers` JSON those clients already use) and gives the client search instead of
declaration, results by reference, and refs that flow from one server's result into another
server's tool. MCP types are converted at the edge only (`convert`); everything else is byref's
own layers: discovery indexes the upstream catalog, dispatch runs every call (ref resolution,
payload interception, placement), the transcript of each scope is what Message refs address, and
the artifact store holds the bytes.

    async with Gateway(load_config("gateway.json")) as gateway:
        await serve_stdio(gateway)

The house, lowest wing first (`tests/test_layers.py` pins the order; imports point down):
`config/` (the file, tokens, values), `access/` (bearer check, grants, the scope a request runs
as), `ops/` (health, metrics, telemetry), `wire/` (byref's stdio framing on both edges),
`upstream/` (connections to the servers, their processes and who shares them — one per principal
on a shared gateway, pooled —, raw calls, relay of their requests and logs to their owner,
input-required rounds, fan-out), `catalog/` (the toolbox and how it is built, proxied tools,
conversion at the edge, metadata, content beside a result, list changes), `passthrough/` (every
non-tool feature: resources, prompts, completion, logging, roots, byref's artifacts as
resources), `core.py` (the gateway's life and the call sequence), `edge/` (the MCP server and its
transports, the ops routes, and `edge/lanes/`, the SDK bypasses). Where a change goes: a
tools/call answered wrongly over HTTP → `edge/` (and `edge/lanes/http.py`); resource URIs →
`passthrough/uris.py`; a server that will not start → `upstream/`. Its benchmark lives in
`byref.bench.gateway.run`.
"""

from byref.gateway.catalog.toolbox import CALL_TOOL, Toolbox
from byref.gateway.config.file import ConfigError, GatewayConfig, Grant, load_config
from byref.gateway.config.servers import ServerConfig
from byref.gateway.core import Gateway
from byref.gateway.edge.server import build_server, http_app, listen_socket, serve_http, serve_stdio
from byref.gateway.upstream.instance.bounds import UpstreamError

__all__ = [
    "CALL_TOOL", "ConfigError", "Gateway", "GatewayConfig", "Grant", "ServerConfig", "Toolbox",
    "UpstreamError", "build_server", "http_app", "listen_socket", "load_config", "serve_http",
    "serve_stdio",
]
