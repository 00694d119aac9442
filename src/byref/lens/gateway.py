"""The lens inside `byref gateway --transport http`, at `/lens`: the caller's own runs only.

Owns the ASGI app the gateway mounts. The law: who the caller is comes from the gateway's own
bearer check (the SDK's authentication middleware puts the verified token's tenant and principal
in the request's `user`); a request without one is 401 before any run is touched. The caller
sees the conversations its owner opened (tenant, principal and grant: the token's client_id) and
nothing else: each page's store view is bound to that owner's artifact scope, so another
caller's ref answers as absent (404), exactly like a ref that never existed, and only events
that name the caller's scopes are shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote

import anyio.to_thread

from byref.lens.markup import esc, gap, link, path_part
from byref.lens.readonly import ReadOnlyStore
from byref.lens.run import Run
from byref.lens.web import Lens, Response, html_response
from byref.store import ArtifactStore, Scope
from byref.transcript import Transcript

ASGIScope = MutableMapping[str, Any]
ASGIApp = Callable[[ASGIScope, Any, Any], Any]


def lens_route(states: Callable[[], Iterable[Any]], store: ArtifactStore | None, *,
               events: Callable[[], Iterable[dict[str, Any]]] | None = None,
               prefix: str = "/lens") -> Any:
    """A Starlette route serving `lens_app` under `prefix` (for `custom_starlette_routes`)."""
    from starlette.routing import Route

    return Route(prefix + "{rest:path}", endpoint=_Endpoint(
        lens_app(states, store, events=events, prefix=prefix)))


class _Endpoint:
    """An ASGI app as a Starlette endpoint: an instance, so Route passes it the raw scope."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: ASGIScope, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def lens_app(states: Callable[[], Iterable[Any]], store: ArtifactStore | None, *,
             events: Callable[[], Iterable[dict[str, Any]]] | None = None,
             prefix: str = "/lens") -> ASGIApp:
    """`states()` lists the gateway's conversations (each with `.scope` and `.transcript`),
    `store` is the gateway's artifact store, `events()` what its trace holds, if it keeps one;
    pages live under `prefix` below the app's root path."""

    def answer(identity: tuple[str, str, str], method: str, root: str, path: str,
               query: str) -> Response:
        # The caller's own: opened by the same owner (tenant, principal and grant), when the
        # gateway says who opened each; else by tenant and principal.
        mine = {s.scope.conversation: s for s in states()
                if getattr(s, "owner", None) == identity[2] or (
                    not hasattr(s, "owner") and (s.scope.tenant, s.scope.principal)
                    == identity[:2])}
        if path in ("", "/"):
            rows = "".join(f"<li>{link(f'{root}/c/{path_part(c)}/', c)}</li>"
                           for c in sorted(mine))
            body = (f"<p>Conversations of {esc(identity[0])}/{esc(identity[1])}:</p><ul>{rows}"
                    "</ul>" if rows else gap("This caller has no conversation yet."))
            return html_response(200, "your conversations", body, root)
        head, _, rest = path.removeprefix("/c/").partition("/")
        state = mine.get(unquote(head)) if path.startswith("/c/") else None
        if state is None:
            return html_response(404, "Not found", gap("No such conversation for this caller."),
                                 root)
        base = f"{root}/c/{head}"
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
    return str(claims["tenant"]), str(claims["principal"]), str(token.client_id)


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
