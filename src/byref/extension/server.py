"""`dev.byref/refs` for an author's own server on the official Python SDK, without the gateway.

Owns `RefsExtension` (an SDK `Extension`: a `tools/call` interceptor) and `refs_server`, the one
line that makes an `MCPServer` with it. Before a tool runs, each top-level argument (or the whole
input) that is a `$ref` envelope is resolved from byref's store under the caller's owner; after
it ran, each text block over the policy's insertion limit is placed by byref's own placement
(`dispatch.outbound.placement.settle`: preview, shape, ref) and, for a client that declared the
extension, announced in `_meta`. The extension's middleware (`listing`) advertises it to
handshake-era clients (`experimental`) and marks every tool property as accepting a ref. Its
host methods (`byref.extension.host`) answer a client that declared it, under the same owner;
`refs_server` also serves the download URLs' route over HTTP.

The law: what docs/extensions/refs.md says of a server, with byref's refusals — the tool does
not run on a refused ref, an absent key is refused in one set of words whatever the reason, and a
client without the extension sees the same content blocks and no `_meta` of ours.

    server = refs_server("mine")          # or MCPServer("mine", extensions=[RefsExtension()])
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from byref.dispatch.outbound.placement import settle
from byref.dispatch.policy import Policy
from byref.extension.host import HostRefused, undeclared
from byref.extension.host_http import (
    METHODS,
    ROUTE_PATH,
    UPLOAD_ROUTE_PATH,
    HostParams,
    answer,
    download_endpoint,
    upload_endpoint,
)
from byref.extension.protocol import IDENTIFIER, announcement, declared, entry, settings
from byref.media import is_text
from byref.refs import (
    MODEL_REF_SCHEMA,
    Blob,
    RefRefusal,
    is_envelope,
    near_envelope,
    parse_model_envelope,
)
from byref.store import ArtifactError, ArtifactStore, Scope
from byref.store.adapters.memory import MemoryStore

OwnerOf = Callable[[ServerRequestContext[Any, Any]], Scope]
"""A request → the scope its refs are minted and resolved in (its owner)."""


def token_owner() -> Scope:
    """The bearer token's client over HTTP, else this process (stdio, or HTTP without auth)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return Scope("mcp", token.client_id if token is not None else "local")


def process_owner(ctx: ServerRequestContext[Any, Any]) -> Scope:
    """The default owner of a request (`token_owner`)."""
    return token_owner()


def absent(key: str) -> str:
    """The one refusal for a key that is not there, whatever the reason."""
    return (f"Artifact {key!r} is not available: it is missing, expired, or was never stored "
            "here. Call the tool that produced it again to get a fresh reference.")


class RefsExtension(Extension):
    """The `dev.byref/refs` extension for an `MCPServer` (byref's store, placement, refusals)."""

    identifier = IDENTIFIER

    def __init__(self, store: ArtifactStore | None = None, *, policy: Policy | None = None,
                 owner: OwnerOf = process_owner) -> None:
        self.store: ArtifactStore = store if store is not None else MemoryStore()
        self.policy = policy or Policy()
        self.owner = owner

    def settings(self) -> dict[str, Any]:
        """The version and the insertion limit, advertised under the identifier."""
        return settings(inline_bytes=self.policy.auto_insert_bytes)

    def methods(self) -> list[MethodBinding]:
        """The host methods (stat, read, upload, authorizeDownload: `byref.extension.host`) and
        SEP-2631's `files/authorizeDownload` / `files/authorizeUpload` (`.files`)."""
        return [MethodBinding(m, HostParams, self._host(m)) for m in METHODS]

    def _host(self, method: str) -> Any:
        async def answer(ctx: ServerRequestContext[Any, Any], params: HostParams
                         ) -> dict[str, Any]:
            try:
                return await self.answer_host(method, ctx, params.members())
            except HostRefused as exc:
                raise MCPError(exc.code, str(exc)) from None
        return answer

    async def answer_host(self, method: str, ctx: ServerRequestContext[Any, Any],
                          params: dict[str, Any]) -> dict[str, Any]:
        """One host method's answer for a client that declared the extension, in its owner's
        scope (raises `HostRefused`)."""
        if not declared(ctx.meta, ctx.session.client_capabilities):
            raise undeclared(method)
        base = None if ctx.request is None else str(ctx.request.base_url)
        answered: dict[str, Any] = await anyio.to_thread.run_sync(
            answer, method, self.store, self.owner(ctx), params, base)
        return answered

    def download(self) -> Any:
        """The download URLs' endpoint, for an HTTP app's `ROUTE_PATH` (`refs_server` adds it):
        owned as the bearer token says (`token_owner`)."""
        return download_endpoint(lambda: self.store, lambda request: token_owner())

    def upload(self) -> Any:
        """The upload URLs' endpoint, for an HTTP app's `UPLOAD_ROUTE_PATH` (as `download`)."""
        return upload_endpoint(lambda: self.store, lambda request: token_owner())

    async def intercept_tool_call(self, params: types.CallToolRequestParams,
                                  ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        """Resolve the arguments' refs (or refuse, the tool not run), run the tool, place its
        large text blocks and announce them to a client that declared the extension."""
        scope = self.owner(ctx)
        arguments = params.arguments if params.arguments is not None else {}
        try:
            resolved = await anyio.to_thread.run_sync(self._resolve, scope, params.name,
                                                      arguments)
        except RefRefusal as exc:
            return _refusal(str(exc))
        arguments.clear()  # in place: the handler is invoked with these very params
        arguments.update(resolved)
        params.arguments = arguments
        result = await call_next(ctx)
        if not isinstance(result, types.CallToolResult) or result.is_error:
            return result
        entries = await anyio.to_thread.run_sync(self._place, scope, params.name, result)
        if declared(ctx.meta, ctx.session.client_capabilities):
            result.meta = {**(result.meta or {}), IDENTIFIER: announcement(entries)}
        return result

    def _resolve(self, scope: Scope, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if is_envelope(arguments):
            whole = self._value(scope, tool, "the input", arguments)
            if not isinstance(whole, dict):
                raise RefRefusal(f"Tool {tool!r} did not run: the input is a reference to "
                                 "something other than an object of arguments.")
            return whole
        if (why := near_envelope(arguments)) is not None:
            raise RefRefusal(f"Tool {tool!r} did not run: the input is almost a reference. "
                             f"{why}")
        out = {}
        for name, value in arguments.items():
            if (why := near_envelope(value)) is not None:
                raise RefRefusal(f"Tool {tool!r} did not run: argument {name!r} is almost a "
                                 f"reference. {why}")
            out[name] = (self._value(scope, tool, f"argument {name!r}", value)
                         if is_envelope(value) else value)
        return out

    def _value(self, scope: Scope, tool: str, where: str, value: object) -> Any:
        try:
            ref = parse_model_envelope(value)
        except RefRefusal as exc:
            raise RefRefusal(f"Tool {tool!r} did not run: {where} is a reference that cannot "
                             f"be used. {exc}") from None
        if not isinstance(ref, Blob) or ref.key is None:
            raise RefRefusal(f"Tool {tool!r} did not run: {where} is a Message reference; "
                             "this server keeps no transcript and resolves Blob refs only.")
        try:
            artifact = self.store.get(scope, ref.key)
        except ArtifactError as exc:
            raise RefRefusal(f"Tool {tool!r} did not run: {where}: {exc}") from None
        if artifact is None:
            raise RefRefusal(f"Tool {tool!r} did not run: {absent(ref.key)}")
        media = artifact.meta.media_type
        if is_text(media) or media == "application/json":
            return artifact.data.decode("utf-8", errors="replace")
        return {"mediaType": media, "base64": base64.b64encode(artifact.data).decode()}

    def _place(self, scope: Scope, tool: str, result: types.CallToolResult
               ) -> list[dict[str, Any]]:
        entries = []
        for i, block in enumerate(result.content):
            if not isinstance(block, types.TextContent):
                continue
            placed = settle(block.text, block.text, tool=tool, ceiling=None, result_kind=None,
                            is_error=False, policy=self.policy, store=self.store, scope=scope)
            if placed.ref is None:
                continue
            result.content[i] = types.TextContent(type="text", text=placed.text)
            meta = self.store.head(scope, placed.ref)
            if meta is not None:
                shape = (placed.recorded.get("shape")
                         if isinstance(placed.recorded, dict) else None)
                entries.append(entry(meta, block=i, shape=shape))
        if entries:
            result.structured_content = None  # the placed text stands for it
        return entries

    async def listing(self, ctx: ServerRequestContext[Any, Any],
                      call_next: CallNext) -> HandlerResult:
        """Server middleware: each listed tool's properties admit a ref (`$defs.ref`), and a
        handshake-era `initialize` result lists the extension under `experimental`."""
        result = await call_next(ctx)
        wire = result.model_dump(by_alias=True, mode="json", exclude_none=True) if isinstance(
            result, types.Result) else result
        if not isinstance(wire, dict):
            return result
        if ctx.method == "tools/list" and isinstance(wire.get("tools"), list):
            for tool in wire["tools"]:
                if isinstance(tool, dict) and isinstance(tool.get("inputSchema"), Mapping):
                    tool["inputSchema"] = accepting(tool["inputSchema"])
                    # A placed result has no structuredContent, which an output schema demands.
                    tool.pop("outputSchema", None)
            return wire
        if ctx.method == "initialize" and isinstance(wire.get("capabilities"), dict):
            caps = wire["capabilities"]
            caps["experimental"] = {**(caps.get("experimental") or {}),
                                    IDENTIFIER: self.settings()}
            return wire
        return result

def accepting(schema: Mapping[str, Any]) -> dict[str, Any]:
    """`schema` with each top-level property admitting a `$ref` envelope (`#/$defs/ref`)."""
    out = dict(schema)
    props = out.get("properties")
    if not isinstance(props, Mapping):
        return out
    defs = dict(out.get("$defs") or {})
    name = "ref" if "ref" not in defs or defs["ref"] == MODEL_REF_SCHEMA else "byref_ref"
    defs[name] = MODEL_REF_SCHEMA
    pointer = {"$ref": f"#/$defs/{name}"}
    out["properties"] = {k: {"anyOf": [v, pointer]} if isinstance(v, Mapping) else v
                         for k, v in props.items()}
    out["$defs"] = defs
    return out


def _refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                is_error=True)


def refs_server(name: str, *, store: ArtifactStore | None = None, policy: Policy | None = None,
                owner: OwnerOf = process_owner, **kwargs: Any) -> MCPServer:
    """An `MCPServer` speaking `dev.byref/refs` (its other arguments as `MCPServer`'s)."""
    refs = RefsExtension(store, policy=policy, owner=owner)
    middleware = [*kwargs.pop("middleware", ()), refs.listing]
    extensions = [*kwargs.pop("extensions", ()), refs]
    server = MCPServer(name, extensions=extensions, middleware=middleware, **kwargs)
    server.custom_route(ROUTE_PATH, methods=["GET"])(refs.download())
    server.custom_route(UPLOAD_ROUTE_PATH, methods=["PUT"])(refs.upload())
    return server
