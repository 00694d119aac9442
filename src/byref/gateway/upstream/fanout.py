"""Requests to the upstreams on behalf of one client request: to every server, or to one.

Owns the plumbing the non-tool handlers (`passthrough`, `passthrough_resources`) share: which
connections to tell of list changes, which servers the caller's grant sees, a request fanned out
to every server with a capability, a request to the one server that owns a name, an upstream
list followed through its cursor, and a request that may be parked for a 2026-07-28 client's
answers (`inputs`). The law: a server that lacks the capability contributes nothing (never an
error), one that fails is left out of a fan-out and named (MCP internal error) when it is asked
directly, and no upstream paginator is followed past `_PAGES` pages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.caching import CacheHint
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.gateway.access.bearer import permits_server
from byref.gateway.upstream.instance.bounds import UpstreamError
from byref.gateway.upstream.instance.manager import LIST_READY
from byref.gateway.upstream.modern.hints import Listed, combined, hint_of
from byref.gateway.upstream.modern.inputs import Parked, Parking, binding
from byref.gateway.upstream.pool import Key
from byref.gateway.upstream.pooled import SHARED, Pooled, key_of
from byref.gateway.upstream.relay import Caller, calling, may_ask
from byref.gateway.wire.sdk_server import connection_of
from byref.store import Scope

T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]
_PAGES = 100
"""Pooled pages followed at most (a paginator that never ends cannot hang the gateway)."""


class Fanout:
    """The upstreams as the non-tool handlers reach them, and the client connections seen."""

    def __init__(self, upstreams: Callable[[], dict[str, Pooled]],
                 scopes: Callable[[], list[Any]],
                 notice: Callable[[str, Any, Key], Awaitable[None]], *,
                 parking: Parking | None = None,
                 owner: Callable[[Ctx], Any] | None = None) -> None:
        self.upstreams = upstreams
        self.scopes = scopes
        """Every scope's state (each has the `bus` its 2026-07-28 listeners hear)."""
        self._notice = notice
        self._parking = parking
        self.owner_of = owner
        """Who may resume a parked request (the scope a request runs in)."""
        self.connections: dict[int, Connection] = {}
        """Handshake-era connections seen, told of resource and prompt list changes."""
        self._wired: set[int] = set()

    def seen(self, ctx: Ctx) -> None:
        """Remember the request's connection (for list changes) and hear every upstream."""
        for up in self.upstreams().values():
            if id(up) not in self._wired:
                self._wired.add(id(up))
                up.on_notice = self._notice
        connection = connection_of(ctx)
        if isinstance(connection, Connection) and connection.has_standalone_channel and \
                id(connection) not in self.connections:
            self.connections[id(connection)] = connection
            connection.exit_stack.callback(self.connections.pop, id(connection), None)

    def calling(self, ctx: Ctx, park: Parked | None = None) -> contextlib.AbstractContextManager[
            Caller]:
        """Mark the request (`relay.calling`) as run by its scope, the owner of the upstream
        instances it reaches (`pooled`)."""
        owner = getattr(self.owner_of(ctx), "scope", None) if self.owner_of else None
        return calling(ctx, park, owner=owner)

    def sees(self, ctx: Ctx) -> Callable[[str], bool]:
        """Whether the request's grant sees a server (resources and prompts are granted by
        server; an unseen one's are never listed and read as ones no server offers)."""
        grant = getattr(self.owner_of(ctx), "grant", None) if self.owner_of else None
        return lambda server: permits_server(grant, server)

    async def each(self, doing: str, has: Callable[[types.ServerCapabilities], bool],
                   op: Callable[[Client], Awaitable[T]], *,
                   late: types.ServerNotification | None = None) -> dict[str, T]:
        """`op` on every server that has the capability (in parallel, config order kept);
        servers that fail are left out. For a client's list (`late`: its change notice), a
        server still starting after `LIST_READY` s is left out too, and `late` is announced to
        the clients once it is up (if it has the capability)."""
        got: dict[str, T] = {}

        async def one(up: Pooled) -> None:
            if late is not None:
                async def announce(client: Client) -> None:
                    if has(client.server_capabilities):
                        await self._notice(up.name, late, SHARED)

                if await up.ready(LIST_READY, doing, announce) is None:
                    return

            async def run(client: Client) -> T | None:
                return await op(client) if has(client.server_capabilities) else None

            with contextlib.suppress(UpstreamError):
                found = await up.request(doing, run)
                if found is not None:
                    got[up.name] = found

        ups = list(self.upstreams().values())
        async with anyio.create_task_group() as group:
            for up in ups:
                group.start_soon(one, up)
        return {up.name: got[up.name] for up in ups if up.name in got}

    async def on(self, server: str, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        """`op` on one server; its failure raises as an MCP internal error naming it."""
        try:
            return await self.upstreams()[server].request(doing, op)
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.public) from None

    def instance_of(self, server: str, owner: Scope | None) -> Key:
        """Which instance of `server` serves requests run as `owner` (`pool.key_of`)."""
        pooled = self.upstreams().get(server)
        return key_of(pooled.share if pooled is not None else "all", owner)

    async def watch(self, server: str, uri: str) -> None:
        """The caller's instance of `server` watches `uri` for one watcher more
        (`Upstream.watch`); its failure raises as an MCP internal error naming it."""
        try:
            await self.upstreams()[server].watch(uri)
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, exc.public) from None

    async def unwatch(self, server: str, uri: str, instance: Key) -> None:
        """`instance` of `server` watches `uri` for one watcher fewer (never raises, never
        starts it)."""
        pooled = self.upstreams().get(server)
        if pooled is not None:
            await pooled.unwatch(uri, instance)

    async def asking(self, ctx: Ctx, params: types.InputResponseRequestParams,
                     run: Callable[[], Awaitable[T]]) -> T | types.InputRequiredResult:
        """Run under the request's mark; a 2026-07-28 client that can answer questions has it
        parked, so an upstream's question becomes its InputRequiredResult (`inputs`); one that
        fails after its upstream asked for a capability the client lacks answers -32021."""
        if self._parking is not None and self.owner_of is not None and \
                ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and may_ask(ctx):
            async def parked(park: Parked) -> T:
                with self.calling(ctx, park) as caller:
                    return await _refused(caller, run)

            answer: T | types.InputRequiredResult = await self._parking.call(
                self.owner_of(ctx), params.request_state, params.input_responses, parked,
                call=binding(ctx.method, params))
            return answer
        with self.calling(ctx) as caller:
            return await _refused(caller, run)


async def _refused(caller: Caller, run: Callable[[], Awaitable[T]]) -> T:
    """`run`'s answer; its failure after an upstream asked `caller` for a capability it did not
    declare is the MissingRequiredClientCapabilityError naming it."""
    try:
        return await run()
    except MCPError:
        if caller.missing:
            raise caller.refusal() from None
        raise


async def follow(fetch: Callable[[str | None], Awaitable[Any]], items: str) -> Listed[Any]:
    """Every item of an upstream list, following its cursor (at most `_PAGES` pages), with the
    cache hint its pages carried (`hints`)."""
    out: Listed[Any] = Listed()
    pages: list[types.CacheableResult] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        got = await fetch(cursor)
        pages.append(got)
        out.extend(getattr(got, items))
        if not (cursor := got.next_cursor):
            break
    out.hint = hint_of(pages)
    return out


def bound_of(lists: Iterable[Any]) -> dict[str, Any]:
    """The `ttl_ms`/`cache_scope` a list aggregating these upstream lists may promise at most
    (`hints.combined`; read by `caching`), or nothing when none carried a hint."""
    found: CacheHint | None = None
    for listed in lists:
        found = combined(found, getattr(listed, "hint", None))
    return {} if found is None else {"ttl_ms": found.ttl_ms, "cache_scope": found.scope}
