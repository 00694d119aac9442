"""Every server feature but tools, passed through: resources, prompts, completion, logs, roots.

Owns the gateway's handlers for `resources/*`, `prompts/*`, `completion/complete`,
`logging/setLevel` and `notifications/roots/list_changed`, and the upstream notifications that
answer them (resource updates, list changes). Names and URIs are the gateway's (`resources`,
`prompts`); every request runs on the upstream that owns the name, bounded and failing as a tool
call does (`Upstream.request`), and under the client request's mark (`relay`), so what the server
sends meanwhile reaches that client. The law: a server that lacks a capability contributes
nothing to its list (never an error), one that fails is left out of a list and named when it is
asked directly, a grant naming servers sees only their resources and prompts (another's read
as ones no server offers), and the gateway's own lists paginate (`PAGE` items, an opaque
cursor). byref's own artifacts (`byref:artifact/<ref>`) are answered from the store in the
caller's scope (`artifact_resources`), never by an upstream.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from byref.gateway.artifact_resources import ArtifactResources
from byref.gateway.auth import permits_server
from byref.gateway.inputs import Parked, Parking
from byref.gateway.pages import page
from byref.gateway.prompts import PromptIndex, prompt_not_offered
from byref.gateway.relay import calling, may_ask
from byref.gateway.resources import (
    ARTIFACT_TEMPLATE,
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
from byref.gateway.upstream import Upstream, UpstreamError
from byref.store import ArtifactStore

T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]
_PAGES = 100
"""Upstream pages followed at most (a paginator that never ends cannot hang the gateway)."""


class Passthrough:
    """The non-tool features of every upstream, behind the gateway's names."""

    def __init__(self, upstreams: Callable[[], dict[str, Upstream]],
                 scopes: Callable[[], list[Any]], *, parking: Parking | None = None,
                 owner: Callable[[Ctx], Any] | None = None,
                 store: ArtifactStore | None = None) -> None:
        self._upstreams = upstreams
        self.artifacts = (ArtifactResources(store, lambda ctx: owner(ctx).scope)
                          if store is not None and owner is not None else None)
        """byref's own artifacts, as resources in the scope `owner` gives (both needed)."""
        self._scopes = scopes
        self._parking = parking
        self._owner_of = owner
        """Who may resume a parked request (the scope a request runs in)."""
        self.resources = ResourceIndex()
        self.prompts = PromptIndex()
        self.subscriptions = Subscriptions()
        self._connections: dict[int, Connection] = {}
        """Handshake-era connections seen, told of resource and prompt list changes."""
        self._wired: set[int] = set()
        self._listening: dict[tuple[str, str], int] = {}
        """(server, URI) → 2026-07-28 listen streams watching it."""

    # -- plumbing ------------------------------------------------------------------------------
    def seen(self, ctx: Ctx) -> None:
        """Remember the request's connection (for list changes) and hear every upstream."""
        for up in self._upstreams().values():
            if id(up) not in self._wired:
                self._wired.add(id(up))
                up.on_notice = self.notice
        connection = getattr(ctx.session, "_connection", None)
        if isinstance(connection, Connection) and connection.has_standalone_channel and \
                id(connection) not in self._connections:
            self._connections[id(connection)] = connection
            connection.exit_stack.callback(self._connections.pop, id(connection), None)

    def _upstream(self, server: str) -> Upstream:
        return self._upstreams()[server]

    def _sees(self, ctx: Ctx) -> Callable[[str], bool]:
        """Whether the request's grant sees a server (resources and prompts are granted by
        server; an unseen one's are never listed and read as ones no server offers)."""
        grant = getattr(self._owner_of(ctx), "grant", None) if self._owner_of else None
        return lambda server: permits_server(grant, server)

    async def _each(self, doing: str, has: Callable[[types.ServerCapabilities], bool],
                    op: Callable[[Client], Awaitable[T]]) -> dict[str, T]:
        """`op` on every server that has the capability (in parallel, config order kept);
        servers that fail are left out."""
        got: dict[str, T] = {}

        async def one(up: Upstream) -> None:
            async def run(client: Client) -> T | None:
                return await op(client) if has(client.server_capabilities) else None

            with contextlib.suppress(UpstreamError):
                found = await up.request(doing, run)
                if found is not None:
                    got[up.name] = found

        ups = list(self._upstreams().values())
        async with anyio.create_task_group() as group:
            for up in ups:
                group.start_soon(one, up)
        return {up.name: got[up.name] for up in ups if up.name in got}

    async def _on(self, server: str, doing: str, op: Callable[[Client], Awaitable[T]]) -> T:
        try:
            return await self._upstream(server).request(doing, op)
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from None

    # -- resources -----------------------------------------------------------------------------
    async def _all_resources(self) -> dict[str, list[types.Resource]]:
        async def fetch(client: Client) -> list[types.Resource]:
            return await _follow(lambda c: client.list_resources(cursor=c), "resources")

        found = await self._each("listing its resources", _has_resources, fetch)
        for server, resources in found.items():
            self.resources.listed(server, resources)
        return found

    async def _all_templates(self) -> dict[str, list[types.ResourceTemplate]]:
        async def fetch(client: Client) -> list[types.ResourceTemplate]:
            return await _follow(lambda c: client.list_resource_templates(cursor=c),
                                 "resource_templates")

        found = await self._each("listing its resource templates", _has_resources, fetch)
        for server, templates in found.items():
            self.resources.listed_templates(server, templates)
        return found

    async def list_resources(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourcesResult:
        self.seen(ctx)
        with calling(ctx):
            found = await self._all_resources()
        sees = self._sees(ctx)
        items = [listed_resource(s, r) for s, rs in found.items() if sees(s) for r in rs]
        if self.artifacts is not None:
            items += await self.artifacts.resources(ctx)
        got, cursor = page(items, params.cursor if params else None)
        return types.ListResourcesResult(resources=got, next_cursor=cursor)

    async def list_templates(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                             ) -> types.ListResourceTemplatesResult:
        self.seen(ctx)
        with calling(ctx):
            found = await self._all_templates()
        sees = self._sees(ctx)
        items = [listed_template(s, t) for s, ts in found.items() if sees(s) for t in ts]
        if self.artifacts is not None:
            items.append(ARTIFACT_TEMPLATE)
        got, cursor = page(items, params.cursor if params else None)
        return types.ListResourceTemplatesResult(resource_templates=got, next_cursor=cursor)

    async def _owner(self, uri: str, sees: Callable[[str], bool] | None = None
                     ) -> tuple[str, str]:
        """(server, its URI) for a URI a client sent: the gateway's form, or a server's own
        (among the servers `sees` admits: the caller's grant)."""
        pair = split(uri, self._upstreams())
        if pair is not None:
            return pair
        owners = [s for s in self.resources.owners(uri) if sees is None or sees(s)]
        if len(owners) != 1:  # not known yet, or known as several: ask the servers again
            await self._all_resources()
            await self._all_templates()
            owners = [s for s in self.resources.owners(uri) if sees is None or sees(s)]
        if len(owners) != 1:
            raise unresolved(uri, owners)
        return owners[0], uri

    async def read_resource(self, ctx: Ctx, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult | types.InputRequiredResult:
        self.seen(ctx)
        asked = str(params.uri)
        ref = artifact_ref(asked)
        if ref is not None and self.artifacts is not None:  # byref's own, in the caller's scope
            return await self.artifacts.read(ctx, asked, ref)

        async def run() -> types.ReadResourceResult:
            server, uri = await self._owner(asked, self._sees(ctx))
            if not self._sees(ctx)(server):
                raise unresolved(asked, [])

            async def read(client: Client) -> types.ReadResourceResult:
                return await client.read_resource(uri)

            result = await self._on(server, f"reading {uri!r}", read)
            return renamed_contents(result, server, asked, uri)

        return await self._asking(ctx, params, run)

    async def _asking(self, ctx: Ctx, params: types.InputResponseRequestParams,
                      run: Callable[[], Awaitable[T]]) -> T | types.InputRequiredResult:
        """Run under the request's mark; a 2026-07-28 client that can answer questions has it
        parked, so an upstream's question becomes its InputRequiredResult (`inputs`)."""
        if self._parking is not None and self._owner_of is not None and \
                ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and may_ask(ctx):
            async def parked(park: Parked) -> T:
                with calling(ctx, park):
                    return await run()

            answer: T | types.InputRequiredResult = await self._parking.call(
                self._owner_of(ctx), params.request_state, params.input_responses, parked)
            return answer
        with calling(ctx):
            return await run()

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        self.seen(ctx)
        asked = str(params.uri)
        connection = getattr(ctx.session, "_connection", None)
        ref = artifact_ref(asked)
        if ref is not None and self.artifacts is not None:  # stored bytes never change
            await self.artifacts.check(ctx, asked, ref)
            return types.EmptyResult()
        with calling(ctx):
            server, uri = await self._owner(asked, self._sees(ctx))
            if not self._sees(ctx)(server):
                raise unresolved(asked, [])
            if not isinstance(connection, Connection):
                raise MCPError(types.INVALID_REQUEST, "This connection cannot take updates.")
            first = not self._interest((server, uri))
            self.subscriptions.add((server, uri), connection, asked)
            if first:
                try:
                    await self._subscribe_upstream(server, uri)
                except MCPError:
                    self.subscriptions.remove((server, uri), connection)
                    raise
        return types.EmptyResult()

    def _interest(self, pair: tuple[str, str]) -> int:
        return len(self.subscriptions.of(pair)) + self._listening.get(pair, 0)

    async def _subscribe_upstream(self, server: str, uri: str) -> None:
        async def sub(client: Client) -> None:
            caps = client.server_capabilities.resources
            if caps is None or not caps.subscribe:
                raise MCPError(types.INVALID_REQUEST, (
                    f"Server {server!r} does not offer resource subscriptions."))
            with warnings.catch_warnings():  # removed in 2026-07-28; upstreams are handshake-era
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource(uri)

        await self._on(server, f"subscribing to {uri!r}", sub)

    async def _unsubscribe_upstream(self, server: str, uri: str) -> None:
        async def unsub(client: Client) -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.unsubscribe_resource(uri)

        await self._on(server, f"unsubscribing from {uri!r}", unsub)

    @contextlib.asynccontextmanager
    async def listening(self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
                        ) -> AsyncIterator[None]:
        """A 2026-07-28 listen stream's resource URIs are subscribed upstream while it is open
        (its updates arrive on the scope's bus, `notice`)."""
        self.seen(ctx)
        pairs: list[tuple[str, str]] = []
        with calling(ctx):
            for asked in params.notifications.resource_subscriptions or ():
                with contextlib.suppress(MCPError):  # a URI no server offers never updates
                    pair = await self._owner(asked, self._sees(ctx))
                    if not self._sees(ctx)(pair[0]):
                        continue
                    first = not self._interest(pair)
                    self._listening[pair] = self._listening.get(pair, 0) + 1
                    pairs.append(pair)
                    if first:
                        await self._subscribe_upstream(*pair)
        try:
            yield
        finally:
            for pair in pairs:
                self._listening[pair] -= 1
                if not self._listening[pair]:
                    del self._listening[pair]
                if not self._interest(pair):
                    with anyio.CancelScope(shield=True), anyio.move_on_after(5), \
                            contextlib.suppress(MCPError):
                        await self._unsubscribe_upstream(*pair)

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams
                          ) -> types.EmptyResult:
        self.seen(ctx)
        asked = str(params.uri)
        connection = getattr(ctx.session, "_connection", None)
        if artifact_ref(asked) is not None and self.artifacts is not None:
            return types.EmptyResult()  # nothing was watched
        with calling(ctx):
            server, uri = await self._owner(asked)
            if isinstance(connection, Connection) and self.subscriptions.remove(
                    (server, uri), connection) and not self._interest((server, uri)):
                await self._unsubscribe_upstream(server, uri)
        return types.EmptyResult()

    # -- prompts -------------------------------------------------------------------------------
    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        self.seen(ctx)
        with calling(ctx):
            items = self.prompts.listed(await self._all_prompts())
        sees = self._sees(ctx)
        items = [p for p in items if sees(self.prompts.names[p.name][0])]
        got, cursor = page(items, params.cursor if params else None)
        return types.ListPromptsResult(prompts=got, next_cursor=cursor)

    async def _all_prompts(self) -> dict[str, list[types.Prompt]]:
        async def fetch(client: Client) -> list[types.Prompt]:
            return await _follow(lambda c: client.list_prompts(cursor=c), "prompts")

        return await self._each("listing its prompts", lambda c: c.prompts is not None, fetch)

    async def _prompt(self, name: str, sees: Callable[[str], bool] | None = None
                      ) -> tuple[str, str]:
        found = self.prompts.resolve(name, sees)
        if found is None:
            self.prompts.listed(await self._all_prompts())
            found = self.prompts.resolve(name, sees)
        if found is None:
            raise self.prompts.unresolved(name)
        return found

    async def get_prompt(self, ctx: Ctx, params: types.GetPromptRequestParams
                         ) -> types.GetPromptResult | types.InputRequiredResult:
        self.seen(ctx)

        async def run() -> types.GetPromptResult:
            server, name = await self._prompt(params.name, self._sees(ctx))
            if not self._sees(ctx)(server):
                raise prompt_not_offered(params.name)

            async def get(client: Client) -> types.GetPromptResult:
                return await client.get_prompt(name, params.arguments)

            return await self._on(server, f"getting prompt {name!r}", get)

        return await self._asking(ctx, params, run)

    # -- completion, logging, roots ------------------------------------------------------------
    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        self.seen(ctx)
        ref = params.ref
        if isinstance(ref, types.ResourceTemplateReference) and self.artifacts is not None and \
                ref.uri == ARTIFACT_TEMPLATE.uri_template:  # the caller's own refs
            return await self.artifacts.complete(ctx, params.argument.value)
        with calling(ctx):
            upstream_ref: types.PromptReference | types.ResourceTemplateReference
            if isinstance(ref, types.PromptReference):
                server, name = await self._prompt(ref.name)
                if not self._sees(ctx)(server):
                    raise prompt_not_offered(ref.name)
                upstream_ref = ref.model_copy(update={"name": name})
            else:
                server, uri = await self._template_owner(str(ref.uri))
                if not self._sees(ctx)(server):
                    raise unresolved(str(ref.uri), [])
                upstream_ref = ref.model_copy(update={"uri": uri})
            context = params.context.arguments if params.context is not None else None

            async def complete(client: Client) -> types.CompleteResult:
                if client.server_capabilities.completions is None:
                    return types.CompleteResult(completion=types.Completion(values=[]))
                return await client.complete(upstream_ref, {
                    "name": params.argument.name, "value": params.argument.value}, context)

            return await self._on(server, "completing an argument", complete)

    async def _template_owner(self, uri: str) -> tuple[str, str]:
        pair = split(uri, self._upstreams())
        if pair is not None:
            return pair
        templates = await self._all_templates()
        owners = sorted(s for s, ts in templates.items() if any(t.uri_template == uri for t in ts))
        if len(owners) != 1:
            owners = owners or self.resources.owners(uri)
        if len(owners) != 1:
            raise unresolved(uri, owners)
        return owners[0], uri

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """Forwarded to every server that logs (their connection is shared, so the level is the
        last one any client set)."""
        self.seen(ctx)

        async def level(client: Client) -> bool:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.set_logging_level(params.level)
            return True

        with calling(ctx):
            await self._each("setting its log level", lambda c: c.logging is not None, level)
        return types.EmptyResult()

    async def roots_changed(self, ctx: Ctx, params: types.NotificationParams | None) -> None:
        """The client's roots changed: every running server that asks for roots is told."""
        for up in self._upstreams().values():
            client = up.connected
            if client is None:
                continue
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_roots_list_changed()

    # -- upstream notifications ----------------------------------------------------------------
    async def notice(self, server: str, message: Any) -> None:
        """A server's resource update or list change, to the clients it concerns."""
        if isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            for connection, asked in self.subscriptions.of((server, uri)):
                with contextlib.suppress(Exception), anyio.move_on_after(5):
                    await connection.send_resource_updated(asked)
            for state in self._scopes():  # 2026-07-28 listeners: both spellings may be watched
                for form in (namespaced(server, uri), uri):
                    with contextlib.suppress(Exception):
                        await state.bus.publish(ResourceUpdated(uri=form))
            return
        prompts = isinstance(message, types.PromptListChangedNotification)
        for connection in list(self._connections.values()):
            with contextlib.suppress(Exception), anyio.move_on_after(5):
                if prompts:
                    await connection.send_prompt_list_changed()
                else:
                    await connection.send_resource_list_changed()
        for state in self._scopes():
            with contextlib.suppress(Exception):
                await state.bus.publish(PromptsListChanged() if prompts else
                                        ResourcesListChanged())


async def _follow(fetch: Callable[[str | None], Awaitable[Any]], items: str) -> list[Any]:
    """Every item of an upstream list, following its cursor (at most `_PAGES` pages)."""
    out: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        got = await fetch(cursor)
        out.extend(getattr(got, items))
        if not (cursor := got.next_cursor):
            break
    return out


def _has_resources(caps: types.ServerCapabilities) -> bool:
    return caps.resources is not None
