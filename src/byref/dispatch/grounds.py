"""Where a run stands: its artifact store, scope, policy and event emitter, made once.

Owns the defaults every front door shares (`Harness`, `Session`, `Bridge`): `"memory"` is an
in-memory store of the run's own, `None` runs storeless, no scope is a local scope with a fresh
conversation, no policy is the default `Policy`, no emitter is one that records nothing. The law:
the four defaults are made here and nowhere else, so changing one changes every front door.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from byref.dispatch.policy import Policy
from byref.events import Emitter
from byref.store import ArtifactStore, MemoryStore, Scope

StoreChoice = ArtifactStore | Literal["memory"] | None
"""A store, `"memory"` for one of the run's own, or None for a storeless run."""


@dataclass(frozen=True, slots=True)
class Grounds:
    """The store, scope, policy and emitter one run dispatches with."""

    store: ArtifactStore | None
    scope: Scope
    policy: Policy
    emit: Emitter

    @classmethod
    def make(cls, *, store: StoreChoice = "memory", scope: Scope | None = None,
             policy: Policy | None = None, emit: Emitter | None = None) -> Grounds:
        """Each given value as it is; each missing one as every front door defaults it."""
        emit = emit if emit is not None else Emitter()
        return cls(store=MemoryStore(emit=emit) if store == "memory" else store,
                   scope=scope or Scope("local", conversation=uuid.uuid4().hex),
                   policy=policy or Policy(), emit=emit)
