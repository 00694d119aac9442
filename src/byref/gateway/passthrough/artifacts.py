"""byref's stored artifacts as MCP resources: listed, read, completed and subscribed to in the
caller's scope.

Owns the store side of `byref:artifact/<ref>` (its naming and contents are in `resources`): the
caller's newest artifacts for resources/list, a read of one, completion of the template's `ref`,
and subscription (accepted for an artifact the caller can read: stored bytes never change, so no
update ever follows). Store calls run in a worker thread (the port is blocking). The law: every
question is answered in the scope of the request that asked it, and another scope's artifact is
answered exactly as one that never existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import mcp_types as types

from byref.gateway.passthrough.bounded import READ_BYTES, cut, index, split_page
from byref.gateway.passthrough.uris import artifact_contents, artifact_missing, artifact_resource
from byref.media import is_text
from byref.store import Artifact, ArtifactMeta, ArtifactStore, PutOptions, Scope

ARTIFACTS_LISTED = 1000
"""The caller's newest artifacts resources/list names (any other still reads by its URI)."""
COMPLETIONS = 100
"""Refs a completion of the artifact template offers at most (the MCP limit)."""


class ArtifactResources:
    """The artifacts of the scope `scope_of(ctx)` names, as resources."""

    def __init__(self, store: ArtifactStore, scope_of: Callable[[Any], Scope]) -> None:
        self._store = store
        self._scope_of = scope_of

    async def listed(self, ctx: Any, limit: int = ARTIFACTS_LISTED) -> list[ArtifactMeta]:
        """The caller's artifacts, newest first, at most `limit`."""
        store, scope = self._store, self._scope_of(ctx)

        def listed() -> list[ArtifactMeta]:
            out: list[ArtifactMeta] = []
            cursor: str | None = None
            while len(out) < limit:
                got = store.list(scope, cursor=cursor, limit=min(100, limit - len(out)))
                out.extend(got)
                if not (cursor := got.next_cursor):
                    break
            return out

        return await anyio.to_thread.run_sync(listed)

    async def resources(self, ctx: Any) -> list[types.Resource]:
        """The caller's artifacts as resources (`byref:artifact/<ref>`), newest first, at most
        ARTIFACTS_LISTED."""
        return [artifact_resource(m) for m in await self.listed(ctx)]

    async def read(self, ctx: Any, uri: str, ref: str) -> types.ReadResourceResult:
        """An artifact's bytes in the caller's scope, whole or the page `ref` names (`bounded`:
        one past `READ_BYTES` whole is answered by its pages); raises MCPError
        (`resources.artifact_missing`) when that scope has no such ref, as for one that never
        existed."""
        ref, page = split_page(ref)
        found = await anyio.to_thread.run_sync(self._store.get, self._scope_of(ctx), ref)
        if found is None:
            raise artifact_missing(uri, ref)
        if page is not None:
            piece = cut(found.data, page, is_text(found.meta.media_type))
            return types.ReadResourceResult(
                contents=[artifact_contents(uri, Artifact(meta=found.meta, data=piece))])
        if found.meta.bytes > READ_BYTES:
            return index(uri, [(uri, found.meta)])
        return types.ReadResourceResult(contents=[artifact_contents(uri, found)])

    async def stash(self, ctx: Any, data: bytes, media: str, label: str) -> ArtifactMeta:
        """Store `data` (a resource too large to answer whole) in the caller's scope."""
        options = PutOptions(kind="resource", media_type=media, label=label[:200])
        return await anyio.to_thread.run_sync(self._store.put, self._scope_of(ctx), data,
                                              options)

    async def check(self, ctx: Any, uri: str, ref: str) -> None:
        """Refuse, as a read would, a subscription to an artifact the caller cannot read."""
        if await anyio.to_thread.run_sync(self._store.head, self._scope_of(ctx), ref) is None:
            raise artifact_missing(uri, ref)

    async def complete(self, ctx: Any, value: str) -> types.CompleteResult:
        """The caller's refs that start with `value`, newest first."""
        refs = [m.ref for m in await self.listed(ctx) if m.ref.startswith(value)]
        return types.CompleteResult(completion=types.Completion(
            values=refs[:COMPLETIONS], total=len(refs), has_more=len(refs) > COMPLETIONS))
