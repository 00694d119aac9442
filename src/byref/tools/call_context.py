"""What a tool body may use besides its arguments: the call context and its scoped artifacts.

The law: a tool never names a tenant or composes a key. `ctx.artifacts` is the run's store already
bound to the run's scope (put / head / get / list, no scope argument); `ctx.has_artifacts` is the
branchable fact for a tool that genuinely supports running without a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from byref.errors import MisuseError
from byref.store import Artifact, ArtifactMeta, ArtifactStore, PutOptions, Scope

if TYPE_CHECKING:
    from byref.events import Emitter
    from byref.resolve import Resolver
    from byref.transcript import Transcript


class ScopedArtifacts:
    """The run's store, pre-scoped. Possession of this object is the whole entitlement."""

    def __init__(self, store: ArtifactStore, scope: Scope) -> None:
        self._store = store
        self._scope = scope

    def put(self, data: bytes, *, kind: str, media_type: str = "application/octet-stream",
            label: str | None = None, ttl: float | None = None, digest: bool = False,
            parent_refs: tuple[str, ...] = ()) -> ArtifactMeta:
        """Store `data` in the tool's scope; returns its metadata."""
        return self._store.put(self._scope, data, PutOptions(
            kind=kind, media_type=media_type, label=label, ttl=ttl, digest=digest,
            parent_refs=parent_refs))

    def head(self, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref` in the tool's scope, or None."""
        return self._store.head(self._scope, ref)

    def get(self, ref: str) -> Artifact | None:
        """The artifact `ref` in the tool's scope, or None."""
        return self._store.get(self._scope, ref)

    def list(self, kind: str | None = None, limit: int = 50) -> list[ArtifactMeta]:
        """Up to `limit` live artifacts in the tool's scope, newest first."""
        return list(self._store.list(self._scope, kind, limit=limit))


@dataclass
class ToolContext:
    """Declare a `ctx` parameter on a tool to receive this."""

    resolver: Resolver
    store: ArtifactStore | None
    scope: Scope
    transcript: Transcript
    emit: Emitter
    tool_name: str
    call_id: str
    wanted: Mapping[str, ArtifactMeta] = field(default_factory=dict)
    """For each `wants` argument: the artifact its ref redeemed to (the data is in the argument)."""

    @property
    def has_artifacts(self) -> bool:
        """Whether a store is attached (so `artifacts` can be used)."""
        return self.store is not None

    @property
    def artifacts(self) -> ScopedArtifacts:
        """The store, bound to the tool's scope; raises `RuntimeError` when no store is attached."""
        if self.store is None:
            raise MisuseError(
                f"Tool {self.tool_name!r} used ctx.artifacts but no artifact store is attached; "
                "check ctx.has_artifacts first, or build the agent with a store."
            )
        return ScopedArtifacts(self.store, self.scope)
