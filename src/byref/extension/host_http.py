"""The host methods on the wire: their params as the SDK validates them, one dispatcher for the
refs and SEP-2631 methods, and the download and upload routes.

Owns `HostParams` (any members, `_meta` parsed as every request's), `METHODS` and `answer` (the
four `dev.byref/refs/*` methods and the two `files/*` ones), and the Starlette routes the URLs
point at (`GET {root}/refs/download/{grant}`, `PUT {root}/refs/upload/{grant}`). The law: a
route answers a grant only to the owner it was issued to — the request's own credentials name
the owner (`owner(request)`), as on the MCP route — and an absent grant is one 404 in words;
downloaded bytes are streamed as the store verifies them, uploaded ones read to a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import mcp_types as types
from pydantic import ConfigDict

from byref.extension import files, host
from byref.extension.host import (
    DOWNLOAD_PATH,
    MAX_UPLOAD_BYTES,
    NOT_FOUND,
    HostRefused,
    download,
    url_absent,
)
from byref.store import ArtifactStore, Scope

METHODS = (*host.METHODS, *files.METHODS)
"""Every method a server claiming the extension serves beside `tools/call`."""


def answer(method: str, store: ArtifactStore, scope: Scope, params: dict[str, Any],
           base_url: str | None) -> dict[str, Any]:
    """Answer one of `METHODS` (its params as JSON) or raise `HostRefused`."""
    if method in files.METHODS:
        return files.handle(method, store, scope, params, base_url)
    return host.handle(method, store, scope, params, base_url)


class HostParams(types.RequestParams):
    """A host method's params: whatever members it sent (checked by `byref.extension.host`)."""

    model_config = ConfigDict(**{**types.RequestParams.model_config, "extra": "allow"})

    def members(self) -> dict[str, Any]:
        """The params' members but `_meta`, as sent."""
        return dict(self.model_extra or {})


OwnerOfRequest = Callable[[Any], Scope | None]
"""A Starlette request → the owner its credentials name (None: no owner, every grant absent)."""


ROUTE_PATH = DOWNLOAD_PATH + "{grant}"
"""The download route's Starlette path."""
UPLOAD_ROUTE_PATH = files.UPLOAD_PATH + "{grant}"
"""The upload route's Starlette path."""


def routes(store: Callable[[], ArtifactStore], owner: OwnerOfRequest) -> list[Any]:
    """The download and upload routes (`download_endpoint`, `upload_endpoint`)."""
    from starlette.routing import Route

    return [Route(ROUTE_PATH, endpoint=download_endpoint(store, owner), methods=["GET"]),
            Route(UPLOAD_ROUTE_PATH, endpoint=upload_endpoint(store, owner), methods=["PUT"])]


def upload_endpoint(store: Callable[[], ArtifactStore], owner: OwnerOfRequest) -> Any:
    """The endpoint an upload URL reaches: the body (at most `MAX_UPLOAD_BYTES`) kept in
    `owner(request)`'s scope if it is what the grant declared; answers JSON as `stat`."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    async def serve(request: Request) -> Response:
        scope = owner(request)
        grant = str(request.path_params.get("grant", ""))
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_UPLOAD_BYTES:
                return Response(f"An upload holds at most {MAX_UPLOAD_BYTES:,} bytes.\n",
                                status_code=413, media_type="text/plain")
        try:
            if scope is None:
                raise url_absent()
            kept = await anyio.to_thread.run_sync(files.receive, store(), scope, grant,
                                                  bytes(body))
        except HostRefused as exc:
            status = 404 if exc.code == NOT_FOUND else 400
            return Response(str(exc) + "\n", status_code=status, media_type="text/plain")
        return JSONResponse(kept, status_code=201)

    return serve


def download_endpoint(store: Callable[[], ArtifactStore], owner: OwnerOfRequest) -> Any:
    """The endpoint a download URL reaches, reading `store()` in `owner(request)`'s scope."""
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse

    async def serve(request: Request) -> Response:
        scope = owner(request)
        grant = str(request.path_params.get("grant", ""))
        try:
            if scope is None:
                raise url_absent()
            found = await anyio.to_thread.run_sync(download, store(), scope, grant)
        except HostRefused as exc:
            return Response(str(exc) + "\n", status_code=404, media_type="text/plain")
        meta = found.meta
        headers = {"Content-Length": str(meta.bytes), "Cache-Control": "no-store"}
        if meta.digest is not None:
            headers["ETag"] = f'"{meta.digest}"'
        return StreamingResponse(found.chunks, media_type=meta.media_type, headers=headers)

    return serve
