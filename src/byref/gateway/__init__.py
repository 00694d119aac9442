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

Modules: `config` (the file), `upstream` (connections to the servers), `convert` (the edge),
`proxy` (an upstream tool as a byref `Tool`), `scopes` (who a request runs as), `toolbox`
(one immutable build of what is offered), `core` (the gateway's life and the call sequence),
`server` (the MCP handlers and transports), `fastpath` (plain tools/call answered as wire JSON),
`stdio_transport` (byref's own streams on both stdio edges), `passthrough` (every non-tool
feature: prompts, completion, logging, roots, list changes), `passthrough_resources`
(resources: lists, reads, subscriptions, listen streams), `fanout` (their requests to every
upstream or to the one that owns a name), `resources` and `prompts` (their names, mapped back),
`artifact_resources` (byref's own artifacts as resources), `relay` (upstream → client traffic
to the calling session), `inputs` (2026-07-28 input-required rounds), `spawn` (upstream
processes: their groups, their stderr), `health` (start-up checks), `content` (images, links,
structuredContent beside a result's text), `metadata` (tool metadata, modes, what call_tool may
run). Its benchmark lives in `byref.bench.gateway`.
"""

from byref.gateway.config import ConfigError, GatewayConfig, Grant, ServerConfig, load_config
from byref.gateway.core import Gateway
from byref.gateway.server import build_server, http_app, listen_socket, serve_http, serve_stdio
from byref.gateway.toolbox import CALL_TOOL, Toolbox
from byref.gateway.upstream_bounds import UpstreamError

__all__ = [
    "CALL_TOOL", "ConfigError", "Gateway", "GatewayConfig", "Grant", "ServerConfig", "Toolbox",
    "UpstreamError", "build_server", "http_app", "listen_socket", "load_config", "serve_http",
    "serve_stdio",
]
