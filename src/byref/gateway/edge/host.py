"""The gateway's `dev.byref/refs` host methods and transfer routes (`byref.extension.host`).

Owns installing the host methods (the four `dev.byref/refs/*` and SEP-2631's two `files/*`) on
the gateway's server and the routes its download and upload URLs point at. The law: a host
method answers only a client that declared the extension, in the scope its request runs as (the
artifacts the caller's own tool results were stored in), and a transfer URL answers only the
bearer it was issued to (the route reads the same token claims the MCP route does); a refusal
is a JSON-RPC error in words, an absent ref one set of words.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from byref.extension.host import HostRefused, undeclared
from byref.extension.host_http import METHODS, HostParams, routes
from byref.extension.host_http import answer as answer_host
from byref.extension.protocol import declared
from byref.gateway.access.bearer import restriction
from byref.gateway.access.scopes import owned
from byref.gateway.access.state import ScopeState
from byref.gateway.wire.sdk_server import connection_of
from byref.store import Scope

if TYPE_CHECKING:
    from byref.gateway.core import Gateway
    from byref.gateway.edge.server import GatewayServer


def install_host_methods(server: GatewayServer, gateway: Gateway,
                         scope_of: Callable[[ServerRequestContext[Any, Any]], ScopeState]) -> None:
    """Serve the host methods (`byref.extension.host_http.METHODS`) on `server`."""
    for method in METHODS:
        server.add_request_handler(method, HostParams, _answer(method, gateway, scope_of))


def _answer(method: str, gateway: Gateway,
            scope_of: Callable[[ServerRequestContext[Any, Any]], ScopeState]) -> Any:
    async def answer(ctx: ServerRequestContext[Any, Any], params: HostParams) -> dict[str, Any]:
        connection = connection_of(ctx)
        try:
            if not declared(ctx.meta,
                            None if connection is None else connection.client_capabilities):
                raise undeclared(method)
            scope = scope_of(ctx).store_scope
            base = None if ctx.request is None else str(ctx.request.base_url)
            answered: dict[str, Any] = await anyio.to_thread.run_sync(
                answer_host, method, gateway.store, scope, params.members(), base)
            return answered
        except HostRefused as exc:
            raise MCPError(exc.code, str(exc)) from None
    return answer


def request_owner(request: Any) -> Scope | None:
    """The artifact scope a bearer-checked HTTP request's token owns (None without one)."""
    user = request.scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    claims = user.access_token.claims or {}
    return owned(str(claims["tenant"]), str(claims["principal"]), restriction(claims))


def transfer_routes(gateway: Gateway) -> list[Any]:
    """The download and upload URLs' routes (`/refs/download/…`, `/refs/upload/…`), behind the
    bearer check."""
    return routes(lambda: gateway.store, request_owner)
