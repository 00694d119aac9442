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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use (PEP 562), so `byref.gateway.config` and the stdio front
# (`wire.front`) import without the MCP SDK: `byref gateway` answers its first request first.
_EXPORTS: dict[str, str] = {
    "CALL_TOOL": "byref.gateway.catalog.toolbox", "Toolbox": "byref.gateway.catalog.toolbox",
    "ConfigError": "byref.gateway.config.file", "GatewayConfig": "byref.gateway.config.file",
    "Grant": "byref.gateway.config.file", "load_config": "byref.gateway.config.file",
    "ServerConfig": "byref.gateway.config.servers", "Gateway": "byref.gateway.core",
    "build_server": "byref.gateway.edge.server", "http_app": "byref.gateway.edge.server",
    "listen_socket": "byref.gateway.edge.server", "serve_http": "byref.gateway.edge.server",
    "serve_stdio": "byref.gateway.edge.server",
    "UpstreamError": "byref.gateway.upstream.instance.bounds",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'byref.gateway' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # what the lazy names are, for type checkers (`as`: explicit re-exports)
    from byref.gateway.catalog.toolbox import CALL_TOOL as CALL_TOOL
    from byref.gateway.catalog.toolbox import Toolbox as Toolbox
    from byref.gateway.config.file import ConfigError as ConfigError
    from byref.gateway.config.file import GatewayConfig as GatewayConfig
    from byref.gateway.config.file import Grant as Grant
    from byref.gateway.config.file import load_config as load_config
    from byref.gateway.config.servers import ServerConfig as ServerConfig
    from byref.gateway.core import Gateway as Gateway
    from byref.gateway.edge.server import build_server as build_server
    from byref.gateway.edge.server import http_app as http_app
    from byref.gateway.edge.server import listen_socket as listen_socket
    from byref.gateway.edge.server import serve_http as serve_http
    from byref.gateway.edge.server import serve_stdio as serve_stdio
    from byref.gateway.upstream.instance.bounds import UpstreamError as UpstreamError
