"""Upstream resources passed through: lists, reads, subscriptions and listen streams.

Owns the gateway's handlers for `resources/list`, `resources/templates/list`, `resources/read`,
`resources/subscribe` and `resources/unsubscribe`, the resource URIs a 2026-07-28 listen stream
watches, and the upstream resource updates that answer them. URIs are the gateway's
(`resources`); each request runs on the upstream that owns the URI (`fanout`). The law: a grant
naming servers sees only their resources (another's read as ones no server offers), a URI is
watched on the subscriber's own instance of its server (`Upstream.watch`: asked for while anyone
watches it there, in the server's own generation) and its updates reach only the connections and
listeners that instance serves, and byref's own artifacts (`byref:artifact/<ref>`) are
answered from the store in the caller's scope (`artifact_resources`), never by an upstream. A
read past `bounded.READ_BYTES` is stored there and answered by its pages (`bounded`). A
2026-07-28 client's resources/list leaves the artifacts out (a call that stores a result must not
change its lists); it reads them through the artifact template, as any client may.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.gateway.passthrough.artifacts import ArtifactResources
from byref.gateway.passthrough.bounded import READ_BYTES, data_of, index, size_of
from byref.gateway.passthrough.pages import page
from byref.gateway.passthrough.uris import (
    ARTIFACT_TEMPLATE,
    Instance,
    ResourceIndex,
    Subscriptions,
    artifact_ref,
    listed_resource,
    listed_template,
    namespaced,
    renamed_contents,
    split,
    unresolved,
)
from byref.gateway.upstream.fanout import Ctx, Fanout, bound_of, follow
from byref.gateway.wire.sdk_server import connection_of
from byref.refs import quote


class ResourcePassthrough:
    """Every upstream's resources and templates behind the gateway's URIs, plus byref's own."""

    def __init__(self, fan: Fanout, artifacts: ArtifactResources | None) -> None:
        self._fan = fan
        self.artifacts = artifacts
        self.index = ResourceIndex()
        self.subscriptions = Subscriptions()
        self._closing: set[int] = set()
        """Subscribed connections whose closing unwatches what they watched."""

    async def _all_resources(self, *, listing: bool = False) -> dict[str, list[types.Resource]]:
        # `listing`: a client's list, answered without a server still starting (`Fanout.each`).
        async def fetch(client: Client) -> list[types.Resource]:
            return await follow(lambda c: client.list_resources(cursor=c), "resources")

        found = await self._fan.each("listing its resources", _has_resources, fetch,
                                     late=_RESOURCES_CHANGED if listing else None)
        for server, resources in found.items():
            self.index.listed(server, resources)
        return found

    async def _all_templates(self, *, listing: bool = False
                             ) -> dict[str, list[types.ResourceTemplate]]:
        async def fetch(client: Client) -> list[types.ResourceTemplate]:
            return await follow(lambda c: client.list_resource_templates(cursor=c),
                                "resource_templates")

        found = await self._fan.each("listing its resource templates", _has_resources, fetch,
                                     late=_RESOURCES_CHANGED if listing else None)
        for server, templates in found.items():
            self.index.listed_templates(server, templates)
        return found

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        """One page of the resources the caller's grant sees, then the caller's artifacts."""
        self._fan.seen(ctx)
        with self._fan.calling(ctx):
            found = await self._all_resources(listing=True)
        sees = self._fan.sees(ctx)
        items = [listed_resource(s, r) for s, rs in found.items() if sees(s) for r in rs]
        if self.artifacts is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            items += await self.artifacts.resources(ctx)
        got, cursor = page(items, params.cursor if params else None)
        return types.ListResourcesResult(resources=got, next_cursor=cursor,
                                         **bound_of(v for s, v in found.items() if sees(s)))

    async def list_templates(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        """One page of the templates the caller's grant sees, then the artifact template."""
        self._fan.seen(ctx)
        with self._fan.calling(ctx):
            found = await self._all_templates(listing=True)
        sees = self._fan.sees(ctx)
        items = [listed_template(s, t) for s, ts in found.items() if sees(s) for t in ts]
        if self.artifacts is not None:
            items.append(ARTIFACT_TEMPLATE)
        got, cursor = page(items, params.cursor if params else None)
        return types.ListResourceTemplatesResult(
            resource_templates=got, next_cursor=cursor,
            **bound_of(v for s, v in found.items() if sees(s)))

    async def _owner(self, uri: str, sees: Callable[[str], bool] | None = None
                     ) -> tuple[str, str]:
        """(server, its URI) for a URI a client sent: the gateway's form, or a server's own
        (among the servers `sees` admits: the caller's grant)."""
        pair = split(uri, self._fan.upstreams())
        if pair is not None:
            return pair
        owners = [s for s in self.index.owners(uri) if sees is None or sees(s)]
        if len(owners) != 1:  # not known yet, or known as several: ask the servers again
            await self._all_resources()
            await self._all_templates()
            owners = [s for s in self.index.owners(uri) if sees is None or sees(s)]
        if len(owners) != 1:
            raise unresolved(uri, owners)
        return owners[0], uri

    async def read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult | types.InputRequiredResult:
        """The contents, named as asked, from the owning server (or the store, for an
        artifact); raises MCPError when no server the grant sees offers the URI."""
        self._fan.seen(ctx)
        asked = str(params.uri)
        ref = artifact_ref(asked)
        if ref is not None and self.artifacts is not None:  # byref's own, in the caller's scope
            return await self.artifacts.read(ctx, asked, ref)

        async def run() -> types.ReadResourceResult:
            server, uri = await self._owner(asked, self._fan.sees(ctx))
            if not self._fan.sees(ctx)(server):
                raise unresolved(asked, [])

            async def read(client: Client) -> types.ReadResourceResult:
                return await client.read_resource(uri)

            result = await self._fan.on(server, f"reading {quote(uri)}", read)
            result = renamed_contents(result, server, asked, uri)
            if size_of(result.contents) <= READ_BYTES:
                return result
            return await self._paged(ctx, asked, result)

        return await self._fan.asking(ctx, params, run)

    async def _paged(self, ctx: Ctx, asked: str, result: types.ReadResourceResult
                     ) -> types.ReadResourceResult:
        """A read past `READ_BYTES`: each part stored in the caller's scope, answered by its
        pages (`bounded`)."""
        if self.artifacts is None:
            raise MCPError(types.INTERNAL_ERROR, (
                f"Resource {quote(asked)} is {size_of(result.contents):,} bytes, past the "
                f"{READ_BYTES:,} one read answers, and this gateway has no store to page it "
                "from; read a smaller part of it from the server."))
        parts = []
        for part in result.contents:
            media = part.mime_type or ("text/plain" if isinstance(
                part, types.TextResourceContents) else "application/octet-stream")
            meta = await self.artifacts.stash(ctx, data_of(part), media, str(part.uri))
            parts.append((str(part.uri), meta))
        return index(asked, parts)

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        """Watch a URI for this connection (on the caller's instance of its server, `watch`);
        raises MCPError when no seen server offers it or its server does not offer
        subscriptions."""
        self._fan.seen(ctx)
        asked = str(params.uri)
        connection = connection_of(ctx)
        ref = artifact_ref(asked)
        if ref is not None and self.artifacts is not None:  # stored bytes never change
            await self.artifacts.check(ctx, asked, ref)
            return types.EmptyResult()
        with self._fan.calling(ctx) as caller:
            server, uri = await self._owner(asked, self._fan.sees(ctx))
            if not self._fan.sees(ctx)(server):
                raise unresolved(asked, [])
            if not isinstance(connection, Connection):
                raise MCPError(types.INVALID_REQUEST, "This connection cannot take updates.")
            pair = (server, uri)
            if not self.subscriptions.add(pair, connection, asked,
                                          self._fan.instance_of(server, caller.owner)):
                return types.EmptyResult()  # watched already: once is enough
            try:
                await self._fan.watch(server, uri)
            except MCPError:
                self.subscriptions.remove(pair, connection)
                raise
            if id(connection) not in self._closing:
                self._closing.add(id(connection))
                connection.exit_stack.push_async_callback(self._closed, connection)
        return types.EmptyResult()

    async def _closed(self, connection: Connection) -> None:
        """A subscribed connection closed: what it watched is unwatched."""
        self._closing.discard(id(connection))
        for (server, uri), instance in self.subscriptions.forget(connection):
            with anyio.move_on_after(5), contextlib.suppress(Exception):
                await self._fan.unwatch(server, uri, instance)

    @contextlib.asynccontextmanager
    async def listening(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
                        ) -> AsyncIterator[None]:
        """A 2026-07-28 listen stream's resource URIs are watched on the caller's instances
        while it is open (its updates arrive on the scope's bus, `updated`)."""
        self._fan.seen(ctx)
        watched: list[tuple[tuple[str, str], Instance]] = []
        with self._fan.calling(ctx) as caller:
            for asked in params.notifications.resource_subscriptions or ():
                with contextlib.suppress(MCPError):  # a URI no server offers never updates
                    pair = await self._owner(asked, self._fan.sees(ctx))
                    if not self._fan.sees(ctx)(pair[0]):
                        continue
                    await self._fan.watch(*pair)
                    watched.append((pair, self._fan.instance_of(pair[0], caller.owner)))
        try:
            yield
        finally:
            for (server, uri), instance in watched:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5), \
                        contextlib.suppress(Exception):
                    await self._fan.unwatch(server, uri, instance)

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams
                          ) -> types.EmptyResult:
        """Stop watching a URI for this connection (the instance is told after its last
        watcher)."""
        self._fan.seen(ctx)
        asked = str(params.uri)
        connection = connection_of(ctx)
        if artifact_ref(asked) is not None and self.artifacts is not None:
            return types.EmptyResult()  # nothing was watched
        with self._fan.calling(ctx):
            server, uri = await self._owner(asked)
            instance = self.subscriptions.remove((server, uri), connection) \
                if isinstance(connection, Connection) else None
            if instance is not None:
                await self._fan.unwatch(server, uri, instance)
        return types.EmptyResult()

    async def template_owner(self, uri: str) -> tuple[str, str]:
        """(server, its template) for a template URI a client sent (for completion); raises
        MCPError naming the candidates unless exactly one server has it."""
        pair = split(uri, self._fan.upstreams())
        if pair is not None:
            return pair
        templates = await self._all_templates()
        owners = sorted(s for s, ts in templates.items() if any(t.uri_template == uri for t in ts))
        if len(owners) != 1:
            owners = owners or self.index.owners(uri)
        if len(owners) != 1:
            raise unresolved(uri, owners)
        return owners[0], uri

    async def updated(self, server: str, uri: str, instance: Instance) -> None:
        """A resource of `server`'s `instance` changed: the connections subscribed to it there
        and the listeners of the scopes that instance serves are told, no one else (never
        raises; a slow connection is given 5 s)."""
        for connection, asked, watching in self.subscriptions.of((server, uri)):
            if watching != instance:
                continue
            with contextlib.suppress(Exception), anyio.move_on_after(5):
                await connection.send_resource_updated(asked)
        for state in self._fan.scopes():  # 2026-07-28 listeners: both spellings may be watched
            if self._fan.instance_of(server, state.scope) != instance:
                continue
            for form in (namespaced(server, uri), uri):
                with contextlib.suppress(Exception):
                    await state.bus.publish(ResourceUpdated(uri=form))


def _has_resources(caps: types.ServerCapabilities) -> bool:
    return caps.resources is not None


_RESOURCES_CHANGED = types.ResourceListChangedNotification()
"""What a client told a resource list without a server still starting hears once it is up."""
