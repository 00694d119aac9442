"""The host methods on the wire: their params as the SDK validates them, and the download route.

Owns `HostParams` (any members, `_meta` parsed as every request's) and `download_route`, the
Starlette route a download URL points at (`GET {root}/refs/download/{grant}`). The law: the
route answers a grant only to the owner it was issued to — the request's own credentials name
the owner (`owner(request)`), as on the MCP route — and every refusal is one 404 in words; the
bytes are streamed as the store verifies them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import mcp_types as types
from pydantic import ConfigDict

from byref.extension.host import DOWNLOAD_PATH, HostRefused, download, url_absent
from byref.store import ArtifactStore, Scope


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


def download_route(store: Callable[[], ArtifactStore], owner: OwnerOfRequest) -> Any:
    """The route a download URL points at (`download_endpoint` at `ROUTE_PATH`)."""
    from starlette.routing import Route

    return Route(ROUTE_PATH, endpoint=download_endpoint(store, owner), methods=["GET"])


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
