"""The artifact store: the claim-check port, its adapters, retention and the conformance battery.

Owns where bytes live below the context boundary. The law: five verbs, scope always first; refs
are minted, never content-addressed; every absence answers `None` to the caller while the event
trace records the true reason; optional streaming members are feature-detected, never faked.
Laid out by concern: the port, the adapter kit, retention and URL opening at this root;
the backends in `adapters/` (SQLite, PostgreSQL and S3 imported from their own modules, or opened
by URL, so their dependencies load only when used); the battery in `conformance/`.
"""

from byref.store.adapters.file import FileStore
from byref.store.adapters.memory import MemoryStore
from byref.store.open import open_store
from byref.store.port import (
    Artifact,
    ArtifactError,
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactNotFoundError,
    ArtifactPage,
    ArtifactSizeMismatchError,
    ArtifactStore,
    ArtifactTooLargeError,
    CanGetStream,
    CanPutStream,
    GetStreamStore,
    PutOptions,
    PutStreamStore,
    Scope,
    StoreUnavailableError,
    StoreURLError,
    StreamedArtifact,
    can_get_stream,
    can_put_stream,
    is_key,
    mint_key,
)
from byref.store.retention import Retention
from byref.store.schemes import StoreScheme, StoreURL, register_scheme

__all__ = [
    "Artifact", "ArtifactError", "ArtifactIntegrityError", "ArtifactMeta",
    "ArtifactNotFoundError", "ArtifactPage", "ArtifactSizeMismatchError", "ArtifactStore",
    "ArtifactTooLargeError", "CanGetStream", "CanPutStream", "FileStore", "GetStreamStore",
    "MemoryStore", "PutOptions", "PutStreamStore", "Retention", "Scope", "StoreScheme",
    "StoreURL", "StoreURLError", "StoreUnavailableError", "StreamedArtifact", "can_get_stream",
    "can_put_stream", "is_key", "mint_key", "open_store", "register_scheme",
]
