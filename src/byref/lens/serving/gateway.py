"""The lens inside `byref gateway --transport http`, at `/lens`: the caller's own runs only.

Owns the ASGI app the gateway mounts. The law: who the caller is comes from the gateway's own
bearer check (the SDK's authentication middleware puts the verified token's tenant and principal
in the request's `user`); a request without one is 401 before any run is touched. The caller
sees the conversations its owner opened (tenant, principal and grant: the token's client_id) and
nothing else: each page's store view is bound to that owner's artifact scope, so another
caller's ref answers as absent (404), exactly like a ref that never existed, and only events
that name the caller's scopes are shown. The
route answers the hosts the MCP route answers (the SDK's DNS-rebinding check, on loopback).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote

import anyio.to_thread

from byref.conversations import Conversation, ConversationState
from byref.lens.pages.markup import empty, esc, gap, link, path_part
from byref.lens.reading.readonly import ReadOnlyStore
from byref.lens.reading.run import Run
from byref.lens.serving.stored import conversation_run
from byref.lens.serving.web import Lens, Response, html_response
from byref.store import ArtifactStore, Scope
from byref.transcript import Transcript

ASGIScope = MutableMapping[str, Any]
ASGIApp = Callable[[ASGIScope, Any, Any], Any]


def lens_route(states: Callable[[], Iterable[Any]], store: ArtifactStore | None, *,
               events: Callable[[], Iterable[dict[str, Any]]] | None = None,
               prefix: str = "/lens", security: Any = None,
               kept: Callable[[], ConversationState] | None = None,
               kept_artifacts: Callable[[str, str], Scope] | None = None) -> Any:
    """A Starlette route serving `lens_app` under `prefix` (for `custom_starlette_routes`).
    `security`: the MCP route's `TransportSecuritySettings`, so `/lens` answers the same hosts
    (a request for another `Host` is 421, another `Origin` 403, as on the MCP route)."""
    from starlette.routing import Route

    return Route(prefix + "{rest:path}", endpoint=_Endpoint(
        lens_app(states, store, events=events, prefix=prefix, kept=kept,
                 kept_artifacts=kept_artifacts), security))


class _Endpoint:
    """An ASGI app as a Starlette endpoint: an instance, so Route passes it the raw scope."""

    def __init__(self, app: ASGIApp, security: Any = None) -> None:
        self.app = app
        self.guard: Any = None
        if security is not None and security.enable_dns_rebinding_protection:
            from mcp.server.transport_security import TransportSecurityMiddleware

            self.guard = TransportSecurityMiddleware(security)

    async def __call__(self, scope: ASGIScope, receive: Any, send: Any) -> None:
        if self.guard is not None:
            from starlette.requests import Request

            refused = await self.guard.validate_request(Request(scope, receive))
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def lens_app(states: Callable[[], Iterable[Any]], store: ArtifactStore | None, *,
             events: Callable[[], Iterable[dict[str, Any]]] | None = None,
             prefix: str = "/lens",
             kept: Callable[[], ConversationState] | None = None,
             kept_artifacts: Callable[[str, str], Scope] | None = None) -> ASGIApp:
    """`states()` lists the gateway's open conversations (each with `.scope` and
    `.transcript`), `kept()` is its conversation state (so a conversation no session has open
    is shown too; `kept_artifacts(tenant, principal)` where its artifacts live), `store` its
    artifact store, `events()` what its trace holds, if it keeps
    one; pages live under `prefix` below the app's root path."""

    def answer(identity: tuple[str, str, str], method: str, root: str, path: str,
               query: str) -> Response:
        # The caller's own: opened by the same owner (tenant, principal and grant), when the
        # gateway says who opened each; else by tenant and principal. A conversation no session
        # has open (`kept`) records no owner: it is shown to its principal's unrestricted owner
        # alone, with its artifacts where that owner keeps them (`kept_artifacts`).
        mine: dict[str, Any] = {}
        if kept is not None and identity[2] == json.dumps(
                list(identity[:2]), ensure_ascii=False):
            mine.update((c.scope.conversation, c) for c in kept().conversations(*identity[:2]))
        mine.update((s.scope.conversation, s) for s in states()
                    if getattr(s, "owner", None) == identity[2] or (
                        not hasattr(s, "owner") and (s.scope.tenant, s.scope.principal)
                        == identity[:2]))
        if path in ("", "/"):
            rows = "".join(f"<li>{link(f'{root}/c/{path_part(c)}/', c)}</li>"
                           for c in sorted(mine))
            body = (f"<p>Conversations of {esc(identity[0])}/{esc(identity[1])}:</p><ul>{rows}"
                    "</ul>" if rows else empty("This caller has no conversation yet."))
            return html_response(200, "your conversations", body, root)
        head, _, rest = path.removeprefix("/c/").partition("/")
        state = mine.get(unquote(head)) if path.startswith("/c/") else None
        if state is None:
            return html_response(404, "Not found", gap("No such conversation for this caller."),
                                 root)
        base = f"{root}/c/{head}"
        if isinstance(state, Conversation) and kept is not None:  # kept, not open
            run = conversation_run(kept(), state, store, artifacts=kept_artifacts(
                *identity[:2]) if kept_artifacts is not None else None)
        else:
            run = _run(state.scope, getattr(state, "artifacts", None) or state.scope,
                       state.transcript, store, events)
        return Lens(run, base=base).respond(method, f"{base}/{rest}" + (f"?{query}" if query
                                                                          else ""))

    async def app(scope: ASGIScope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        identity = _identity(scope)
        if identity is None:
            response = Response(401, "text/plain; charset=utf-8",
                                b"The lens needs this gateway's bearer token.\n",
                                {"WWW-Authenticate": "Bearer"})
        else:
            root = scope.get("root_path", "")
            path = scope["path"]
            rel = path[len(root):] if root and path.startswith(root) else path
            root += prefix
            rel = rel.removeprefix(prefix)
            query = scope.get("query_string", b"").decode("latin-1")
            response = await anyio.to_thread.run_sync(answer, identity, scope["method"], root,
                                                      rel, query)
        await send_response(send, response, head_only=scope["method"] == "HEAD")

    return app


def _identity(scope: ASGIScope) -> tuple[str, str, str] | None:
    """(tenant, principal, owner) of the verified bearer token, as the gateway's scopes read it
    (the owner: its client_id, which the gateway makes distinct per grant)."""
    user = scope.get("user")
    token = getattr(user, "access_token", None)
    claims = getattr(token, "claims", None) or {}
    if "tenant" not in claims or "principal" not in claims or token is None:
        return None
    tenant, principal = str(claims["tenant"]), str(claims["principal"])
    # A token that names no client is its principal's unrestricted owner.
    owner = getattr(token, "client_id", None) or json.dumps([tenant, principal],
                                                            ensure_ascii=False)
    return tenant, principal, str(owner)


def _run(scope: Scope, artifacts: Scope, transcript: Transcript, store: ArtifactStore | None,
         events: Callable[[], Iterable[dict[str, Any]]] | None) -> Run:
    # `artifacts`: where the conversation's stored results live (its owner's scope).
    mine = {str(scope), str(artifacts)}
    picked = [e for e in (events() if events else ()) if e.get("scope") in mine]
    view = ReadOnlyStore(store, [artifacts]) if store is not None else None
    gaps = [] if events else ["This gateway keeps no event trace; events are not shown."]
    return Run(transcript, picked, view, f"conversation {scope.conversation}", gaps=gaps)


async def send_response(send: Any, response: Response, *, head_only: bool = False) -> None:
    """Send `response` over an ASGI `send` (the body left out for HEAD)."""
    headers = [(b"content-type", response.content_type.encode()),
               (b"content-length", str(len(response.body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in response.headers.items()]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head_only else response.body})
