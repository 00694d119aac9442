"""The `ArtifactStore` port: five verbs, scope first, plus two optional streaming members.

The law: refs are minted (`art_` + 22 random base62 characters), never derived from content.
Missing, expired, swept and other-scope all answer `None` (one absence, so no caller can probe
another scope); the event trace records the true reason for the operator. `get` verifies an
opt-in sha-256 digest; `get_stream` cannot and says so.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
REF_PREFIX = "art_"


def mint_ref() -> str:
    """A fresh opaque ref: crypto-random, never content-addressed."""
    return REF_PREFIX + "".join(secrets.choice(_BASE62) for _ in range(22))


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may redeem a ref. Compared exactly: values differing only in case are different."""

    tenant: str
    session: str = "default"

    def __post_init__(self) -> None:
        if not self.tenant or not self.session:
            raise ValueError("Scope needs a non-empty tenant and session")

    def __str__(self) -> str:
        return f"{self.tenant}/{self.session}"


@dataclass(frozen=True, slots=True)
class ArtifactMeta:
    """What a consumer needs to decide, without paying for the payload."""

    ref: str
    kind: str
    media_type: str
    bytes: int
    created_at: float
    expires_at: float | None = None
    digest: str | None = None
    label: str | None = None
    parent_refs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref, "kind": self.kind, "mediaType": self.media_type,
            "bytes": self.bytes, "createdAt": self.created_at, "expiresAt": self.expires_at,
            "digest": self.digest, "label": self.label, "parentRefs": list(self.parent_refs),
        }

    @staticmethod
    def from_json(raw: dict[str, Any]) -> ArtifactMeta:
        return ArtifactMeta(
            ref=raw["ref"], kind=raw["kind"], media_type=raw["mediaType"], bytes=raw["bytes"],
            created_at=raw["createdAt"], expires_at=raw.get("expiresAt"),
            digest=raw.get("digest"), label=raw.get("label"),
            parent_refs=tuple(raw.get("parentRefs") or ()),
        )


@dataclass(frozen=True, slots=True)
class Artifact:
    meta: ArtifactMeta
    data: bytes


@dataclass(frozen=True, slots=True)
class StreamedArtifact:
    """A payload as chunks. Nothing here checked `meta.digest`; hash what you read if you must."""

    meta: ArtifactMeta
    chunks: Iterator[bytes]


@dataclass(frozen=True, slots=True)
class PutOptions:
    kind: str
    media_type: str = "application/octet-stream"
    label: str | None = None
    ttl: float | None = None
    digest: bool = False
    parent_refs: tuple[str, ...] = field(default_factory=tuple)


class ArtifactError(Exception):
    """Base of the store's developer-facing errors."""


class ArtifactIntegrityError(ArtifactError):
    """`get` found bytes whose sha-256 does not match the digest recorded at `put`."""


class ArtifactSizeMismatchError(ArtifactError):
    """A streamed put delivered a different number of bytes than it declared; nothing was kept."""


class ArtifactTooLargeError(ArtifactError):
    """A single payload exceeds the scope's byte ceiling, so no eviction could make room."""


class ArtifactNotFoundError(ArtifactError):
    """Raised by doors that must produce bytes (not by the port, which answers None)."""

    def __init__(self, ref: str) -> None:
        super().__init__(
            f"Artifact {ref!r} is not available: it is missing, expired, swept, or was never "
            "stored under this scope. Produce it again with the tool that made it."
        )
        self.ref = ref


@runtime_checkable
class ArtifactStore(Protocol):
    """Five verbs, scope first. Five is the ceiling: no query(), no transform()."""

    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta: ...
    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None: ...
    def get(self, scope: Scope, ref: str) -> Artifact | None: ...
    def delete(self, scope: Scope, ref: str) -> bool: ...
    def list(self, scope: Scope, kind: str | None = None) -> list[ArtifactMeta]: ...
    def close(self) -> None: ...


@runtime_checkable
class CanPutStream(Protocol):
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta: ...


@runtime_checkable
class CanGetStream(Protocol):
    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None: ...


def can_put_stream(store: object) -> bool:
    return isinstance(store, CanPutStream)


def can_get_stream(store: object) -> bool:
    return isinstance(store, CanGetStream)


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verify(meta: ArtifactMeta, data: bytes) -> None:
    if meta.digest is not None and sha256_digest(data) != meta.digest:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} failed its integrity check: stored bytes do not match "
            f"{meta.digest!r}. Re-create it; do not trust this copy."
        )
