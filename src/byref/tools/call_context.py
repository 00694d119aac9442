"""What a tool body may use besides its arguments: the call context and its scoped artifacts.

The law: a tool never names a tenant or composes a key. `ctx.artifacts` is the run's store already
bound to the run's scope (put / head / get / list, no scope argument); `ctx.has_artifacts` is the
branchable fact for a tool that genuinely supports running without a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from byref.errors import MisuseError, RefusalReason
from byref.store import Artifact, ArtifactMeta, ArtifactStore, PutOptions, Scope

if TYPE_CHECKING:
    from byref.events import Emitter
    from byref.resolve import Resolver
    from byref.tools.tool import Tool
    from byref.transcript import Part, Transcript


class ToolCalls(Protocol):
    """Calls a tool body makes to other tools (code mode), through the very dispatcher that
    runs it: the caller's scope, tools, policy, refs, placement and events; each call recorded
    with its lineage (the run that made it) in the run's own record, not the conversation's."""

    run_id: str
    """The call id of the run making these calls; inner calls are `<run_id>.<n>`."""

    def tool(self, name: str) -> Tool | None:
        """The tool a call by `name` would run, or None."""

    def names(self) -> list[str]:
        """Every tool these calls may name."""

    def unknown(self, name: str) -> str | None:
        """Why `name`, which no tool answers to yet, cannot run now (a gateway: its server is
        still starting), or None: it is not a tool at all."""

    def start(self, name: str, args: dict[str, Any],
              server_refs: frozenset[str] = frozenset()) -> Future[Part]:
        """Dispatch one call; its recorded result part (a refusal is a part with is_error).
        `server_refs`: the arguments whose `$ref` the caller built (a recipe from a result it
        was given), parsed as the server's refs rather than the model's."""

    def stop(self, future: Future[Part], reason: RefusalReason, why: str) -> tuple[Part, bool]:
        """Give up on a started call: cancel it where it can be (not a sync tool on a thread)
        and record it so; the error part recorded, and whether it was cancelled."""

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """The tools matching `query`: {name, description} each."""

    def keep_record(self) -> str | None:
        """Store the run's record of inner calls (JSON lines); its art_ ref, or None."""


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
    calls: ToolCalls | None = None
    """Calls to other tools, for a tool marked `calls_tools` (code mode); None otherwise."""

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
