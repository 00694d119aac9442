"""`server/discover`: what the gateway can relay, and which versions its upstreams speak.

Owns the gateway's `DiscoverResult`. The law: a capability is advertised only where every path
to it works for this caller. Tools always (the gateway's own); resources always (its artifacts
are resources), subscribable only when every upstream the caller sees that offers resources
offers subscriptions too (a URI on another would never update) and every such upstream is known;
prompts and logging when an upstream the caller sees offers them, or while one is not known yet
(a cold gateway advertises all it relays, issue 39.E: a client that reads capabilities once would
never ask; its lists fill, announced, as servers come up); completions always (the artifact
template completes, and a server without completion answers with none). Discover never waits for
a server to start: it starts the ones not yet started and answers with those it knows, fresh for
no time while any is unknown. The versions: every one the gateway serves its clients
(both eras, whatever each upstream speaks: the gateway speaks each upstream's own), and under
`UPSTREAMS_META_KEY` each known upstream's negotiated version and self-reported identity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import mcp_types as types
from mcp.server.caching import apply_cache_hint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from byref.gateway.access.bearer import permits_server
from byref.gateway.access.state import ScopeState
from byref.gateway.core import Gateway
from byref.gateway.edge.caching import list_hint
from byref.gateway.upstream.relay import calling

UPSTREAMS_META_KEY = "dev.byref/upstreams"
"""Result `_meta` key: each known upstream → its negotiated `protocolVersion` and `serverInfo`."""
SERVED_VERSIONS = (*reversed(MODERN_PROTOCOL_VERSIONS), *reversed(HANDSHAKE_PROTOCOL_VERSIONS))
"""Every version the gateway serves a client, newest first (modern ones, then the handshake's)."""


def upstream_facts(clients: Iterable[tuple[str, Any]]) -> tuple[
        dict[str, types.ServerCapabilities], dict[str, dict[str, Any]]]:
    """(server → capabilities, server → its version and identity) of the connected clients
    given as (server, Client)."""
    caps: dict[str, types.ServerCapabilities] = {}
    versions: dict[str, dict[str, Any]] = {}
    for name, client in clients:
        caps[name] = client.server_capabilities
        info = client.server_info
        versions[name] = {"protocolVersion": client.protocol_version, **(
            {"serverInfo": info.model_dump(by_alias=True, mode="json", exclude_none=True)}
            if info is not None else {})}
    return caps, versions


def relayed(base: types.ServerCapabilities, upstream: dict[str, types.ServerCapabilities],
            everyone_known: bool) -> types.ServerCapabilities:
    """`base` (what the gateway's handlers serve) cut to what its upstreams make work; prompts
    and logging are kept while any upstream is not `everyone_known` (it may offer them)."""
    with_resources = [c for c in upstream.values() if c.resources is not None]
    subscribe = everyone_known and all(c.resources.subscribe for c in with_resources
                                       if c.resources is not None)
    resources = base.resources
    if resources is not None and resources.subscribe and not subscribe:
        resources = resources.model_copy(update={"subscribe": False})
    return base.model_copy(update={
        "resources": resources,
        "prompts": base.prompts if not everyone_known or any(
            c.prompts is not None for c in upstream.values()) else None,
        "logging": base.logging if not everyone_known or any(
            c.logging is not None for c in upstream.values()) else None,
    })


def discover_handler(server: Server[Any], gateway: Gateway,
                     scope_of: Callable[[ServerRequestContext[Any, Any]], ScopeState]) -> Any:
    """The `server/discover` handler for `server` serving `gateway` (`scope_of`: the caller's
    scope, whose grant decides which upstreams count)."""

    async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
                       ) -> types.DiscoverResult:
        state = scope_of(ctx)
        gateway.prestart(state, "connect")  # a 2026-07-28 client's connect
        # Starts whatever is not started yet, waiting for none; under the request's mark, as a
        # list would be, so a server kept per caller starts this caller's instance.
        with calling(ctx, owner=state.scope):
            await gateway.toolbox(wait=0)
        seen = [n for n in gateway.upstreams.upstreams if permits_server(state.grant, n)]
        clients = []
        for name in seen:
            found = next((up.connected for up in gateway.upstreams[name].instances.values()
                          if up.connected is not None), None)
            if found is not None:
                clients.append((name, found))
        caps, versions = upstream_facts(clients)
        known = len(caps) == len(seen)
        version = ctx.protocol_version if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS \
            else None
        result = types.DiscoverResult(
            supported_versions=list(SERVED_VERSIONS),
            capabilities=relayed(server.get_capabilities(protocol_version=version), caps, known),
            instructions=server.instructions,
            _meta={UPSTREAMS_META_KEY: versions},
        )
        return apply_cache_hint(result, list_hint(gateway.config, state.grant, settled=known))

    return discover
