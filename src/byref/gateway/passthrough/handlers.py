"""Every server feature but tools, passed through: resources, prompts, completion, logs, roots.

Owns the gateway's handlers for `prompts/*`, `completion/complete`, `logging/setLevel` and
`notifications/roots/list_changed`, the upstream notifications that answer them (list changes),
and the one object the server wires every non-tool handler to (the resource handlers are
`passthrough_resources`'s). Names are the gateway's (`prompts`); every request runs on the
upstream that owns the name, bounded and failing as a tool call does (`fanout`,
`Pooled.request`), and under the client request's mark (`relay`), so what the server sends
meanwhile reaches that client. The law: a server that lacks a capability contributes nothing to
its list (never an error), one that fails is left out of a list and named when it is asked
directly, a grant naming servers sees only their resources and prompts (another's read as ones
no server offers), and the gateway's own lists paginate (`PAGE` items, an opaque cursor).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged

from byref.gateway.passthrough.artifacts import ArtifactResources
from byref.gateway.passthrough.pages import page
from byref.gateway.passthrough.prompts import PromptIndex, prompt_not_offered
from byref.gateway.passthrough.resources import ResourcePassthrough
from byref.gateway.passthrough.uris import ARTIFACT_TEMPLATE, unresolved
from byref.gateway.upstream.fanout import Ctx, Fanout, bound_of, follow
from byref.gateway.upstream.modern.inputs import Parking
from byref.gateway.upstream.pool import Key
from byref.gateway.upstream.pooled import SHARED, Pooled
from byref.refs import quote
from byref.store import ArtifactStore


class Passthrough:
    """The non-tool features of every upstream, behind the gateway's names."""

    def __init__(self, upstreams: Callable[[], dict[str, Pooled]],
                 scopes: Callable[[], list[Any]], *, parking: Parking | None = None,
                 owner: Callable[[Ctx], Any] | None = None,
                 store: ArtifactStore | None = None) -> None:
        self._fan = Fanout(upstreams, scopes, self.notice, parking=parking, owner=owner)
        self.artifacts = (ArtifactResources(store, lambda ctx: owner(ctx).store_scope)
                          if store is not None and owner is not None else None)
        """byref's own artifacts, as resources in the scope `owner` gives (both needed)."""
        self.prompts = PromptIndex()
        self.resources = r = ResourcePassthrough(self._fan, self.artifacts)
        self.seen = self._fan.seen
        self.list_resources, self.list_templates = r.list_resources, r.list_templates
        self.read_resource, self.listening = r.read_resource, r.listening
        self.subscribe, self.unsubscribe = r.subscribe, r.unsubscribe

    # -- prompts -------------------------------------------------------------------------------
    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None
                           ) -> types.ListPromptsResult:
        """One page of the prompts the caller's grant sees, under the gateway's names."""
        self.seen(ctx)
        with self._fan.calling(ctx):
            found = await self._all_prompts(listing=True)
            items = self.prompts.listed(found)
        sees = self._fan.sees(ctx)
        items = [p for p in items if sees(self.prompts.names[p.name][0])]
        got, cursor = page(items, params.cursor if params else None)
        return types.ListPromptsResult(prompts=got, next_cursor=cursor,
                                       **bound_of(v for s, v in found.items() if sees(s)))

    async def _all_prompts(self, *, listing: bool = False) -> dict[str, list[types.Prompt]]:
        # `listing`: a client's list, answered without a server still starting (`Fanout.each`).
        async def fetch(client: Client) -> list[types.Prompt]:
            return await follow(lambda c: client.list_prompts(cursor=c), "prompts")

        return await self._fan.each(
            "listing its prompts", lambda c: c.prompts is not None, fetch,
            late=types.PromptListChangedNotification() if listing else None)

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
        """The prompt from the server that owns the name; raises MCPError
        (`prompts.prompt_not_offered`) when no server the grant sees offers it."""
        self.seen(ctx)

        async def run() -> types.GetPromptResult:
            server, name = await self._prompt(params.name, self._fan.sees(ctx))
            if not self._fan.sees(ctx)(server):
                raise prompt_not_offered(params.name)

            async def get(client: Client) -> types.GetPromptResult:
                return await client.get_prompt(name, params.arguments)

            return await self._fan.on(server, f"getting prompt {quote(name)}", get)

        return await self._fan.asking(ctx, params, run)

    # -- completion, logging, roots ------------------------------------------------------------
    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams
                       ) -> types.CompleteResult:
        """Completions for a prompt's or template's argument from the server that owns it (none
        when it does not complete; the caller's refs for the artifact template)."""
        self.seen(ctx)
        ref = params.ref
        if isinstance(ref, types.ResourceTemplateReference) and self.artifacts is not None and \
                ref.uri == ARTIFACT_TEMPLATE.uri_template:  # the caller's own refs
            return await self.artifacts.complete(ctx, params.argument.value)
        with self._fan.calling(ctx):
            upstream_ref: types.PromptReference | types.ResourceTemplateReference
            if isinstance(ref, types.PromptReference):
                server, name = await self._prompt(ref.name)
                if not self._fan.sees(ctx)(server):
                    raise prompt_not_offered(ref.name)
                upstream_ref = ref.model_copy(update={"name": name})
            else:
                server, uri = await self.resources.template_owner(str(ref.uri))
                if not self._fan.sees(ctx)(server):
                    raise unresolved(str(ref.uri), [])
                upstream_ref = ref.model_copy(update={"uri": uri})
            context = params.context.arguments if params.context is not None else None

            async def complete(client: Client) -> types.CompleteResult:
                if client.server_capabilities.completions is None:
                    return types.CompleteResult(completion=types.Completion(values=[]))
                return await client.complete(upstream_ref, {
                    "name": params.argument.name, "value": params.argument.value}, context)

            return await self._fan.on(server, "completing an argument", complete)

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """Sent to every server that logs, on the caller's instances (`pooled`: a server shared by
        all keeps the last level any client set); answered without waiting for a server still
        starting, which is sent the level once it is up (`Upstream.set_level`)."""
        self.seen(ctx)
        with self._fan.calling(ctx):
            async with anyio.create_task_group() as group:
                for up in self._fan.upstreams().values():
                    group.start_soon(up.set_level, params.level)
        return types.EmptyResult()

    async def roots_changed(self, ctx: Ctx, params: types.NotificationParams | None) -> None:
        """The client's roots changed: each running instance serving it is told, and the roots
        request it sends back is this client's to answer (`Relay.owe_roots`); no other owner's
        instance hears of it."""
        with self._fan.calling(ctx) as caller:
            pass
        for pooled in self._fan.upstreams().values():
            up = pooled.serving(caller)
            client = up.connected if up is not None else None
            if up is None or client is None:
                continue
            up.relay.owe_roots(caller)
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.send_roots_list_changed()

    # -- upstream notifications ----------------------------------------------------------------
    async def notice(self, server: str, message: Any, instance: Key = SHARED) -> None:
        """A server's resource update (from its `instance`) or list change, to the clients it
        concerns."""
        if isinstance(message, types.ResourceUpdatedNotification):
            await self.resources.updated(server, str(message.params.uri), instance)
            return
        prompts = isinstance(message, types.PromptListChangedNotification)
        for connection in list(self._fan.connections.values()):
            with contextlib.suppress(Exception), anyio.move_on_after(5):
                if prompts:
                    await connection.send_prompt_list_changed()
                else:
                    await connection.send_resource_list_changed()
        for state in self._fan.scopes():
            with contextlib.suppress(Exception):
                await state.bus.publish(PromptsListChanged() if prompts else
                                        ResourcesListChanged())
