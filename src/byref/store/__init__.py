"""The artifact store: the claim-check port, its adapters, retention and the conformance battery.

Owns where bytes live below the context boundary. The law: five verbs, scope always first; refs
are minted, never content-addressed; every absence answers `None` to the caller while the event
trace records the true reason; optional streaming members are feature-detected, never faked.
"""

from byref.store.file import FileStore
from byref.store.memory import MemoryStore
from byref.store.open import open_store
from byref.store.port import (
    Artifact,
    ArtifactError,
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactNotFoundError,
    ArtifactSizeMismatchError,
    ArtifactStore,
    ArtifactTooLargeError,
    PutOptions,
    Scope,
    StreamedArtifact,
    can_get_stream,
    can_put_stream,
    mint_ref,
)
from byref.store.retention import Retention

__all__ = [
    "Artifact", "ArtifactError", "ArtifactIntegrityError", "ArtifactMeta",
    "ArtifactNotFoundError", "ArtifactSizeMismatchError", "ArtifactStore",
    "ArtifactTooLargeError", "FileStore", "MemoryStore", "PutOptions", "Retention", "Scope",
    "StreamedArtifact", "can_get_stream", "can_put_stream", "mint_ref", "open_store",
]
