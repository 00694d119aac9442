"""The `ArtifactStore` port: five verbs, scope first, plus two optional streaming members.

The law: refs are minted (`art_` + 22 random base62 characters), never derived from content.
Missing, expired, swept, deleted and other-scope all answer `None` (one absence, so no caller can
probe another scope); the event trace records the true reason for the operator. The recorded size
and an opt-in sha-256 digest are verified by `get` and by `get_stream` alike: a stream hashes and
counts as it goes and holds its last chunk back until both match, so wrong bytes always end in
`ArtifactIntegrityError`, never in a complete stream. Five verbs is the ceiling: no query(), no
transform().
"""

from __future__ import annotations

import builtins
import hashlib
import re
import secrets
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, runtime_checkable

import msgspec

from byref.errors import InvalidValue, OperatorError
from byref.refs import KEY_PATTERN, KEY_PREFIX

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_KEY = re.compile(KEY_PATTERN)


def mint_key() -> str:
    """A fresh artifact key (`art_…`, `byref.refs.KEY_PATTERN`): crypto-random, never
    content-addressed."""
    return KEY_PREFIX + "".join(secrets.choice(_BASE62) for _ in range(22))


def is_key(value: str) -> bool:
    """True when `value` has the shape of a minted artifact key (it may still name nothing)."""
    return _KEY.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may redeem a ref: (tenant, principal, conversation), compared exactly.

    Values differing only in letter case, in characters a filesystem or URL would fold (`/`,
    `..`, `%2F`) or in unicode normalization are different scopes and never share storage.
    """

    tenant: str
    principal: str = "default"
    conversation: str = "default"

    def __post_init__(self) -> None:
        for name in ("tenant", "principal", "conversation"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidValue(f"Scope {name} must be a non-empty string, got {value!r}")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidValue(
                    f"Scope {name} {value!r} is not valid Unicode text (it holds a lone "
                    "surrogate); pass the original text, not a decoding artefact."
                ) from None

    def key(self) -> str:
        """A storage-safe name for this scope: exact (no folding of any kind), fixed length."""
        canonical = msgspec.json.encode([self.tenant, self.principal, self.conversation])
        return hashlib.sha256(canonical).hexdigest()

    def __str__(self) -> str:
        return f"{self.tenant}/{self.principal}/{self.conversation}"


@dataclass(frozen=True, slots=True)
class ArtifactMeta:
    """What a consumer needs to decide, without paying for the payload.

    `evicted` is set only on the answer of the `put` that evicted those refs (retention); it is
    not part of the record and is ignored by equality.
    """

    ref: str
    kind: str
    media_type: str
    bytes: int
    created_at: float
    expires_at: float | None = None
    digest: str | None = None
    label: str | None = None
    parent_refs: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    evicted: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        """The record in its stored JSON form (camelCase keys)."""
        return {
            "ref": self.ref, "kind": self.kind, "mediaType": self.media_type,
            "bytes": self.bytes, "createdAt": self.created_at, "expiresAt": self.expires_at,
            "digest": self.digest, "label": self.label, "parentRefs": list(self.parent_refs),
            "metadata": self.metadata,
        }

    @staticmethod
    def from_json(raw: dict[str, Any]) -> ArtifactMeta:
        """The record read back from its stored JSON form."""
        return ArtifactMeta(
            ref=raw["ref"], kind=raw["kind"], media_type=raw["mediaType"], bytes=raw["bytes"],
            created_at=raw["createdAt"], expires_at=raw.get("expiresAt"),
            digest=raw.get("digest"), label=raw.get("label"),
            parent_refs=tuple(raw.get("parentRefs") or ()),
            metadata=dict(raw.get("metadata") or {}),
        )


@dataclass(frozen=True, slots=True)
class Artifact:
    """A stored artifact read whole: its metadata and its bytes."""
    meta: ArtifactMeta
    data: bytes


@dataclass(frozen=True, slots=True)
class StreamedArtifact:
    """A payload as chunks, verified as they pass: the recorded size and `meta.digest` are
    checked before the last chunk is yielded, and a mismatch raises `ArtifactIntegrityError` in
    its place. Bytes before the error are unverified; discard them when it comes."""

    meta: ArtifactMeta
    chunks: Iterator[bytes]


class ArtifactPage(builtins.list[ArtifactMeta]):
    """One page of `list`, newest first; pass `next_cursor` back for the next (None: no more)."""

    def __init__(self, items: Iterable[ArtifactMeta] = (), next_cursor: str | None = None):
        super().__init__(items)
        self.next_cursor = next_cursor


@dataclass(frozen=True, slots=True)
class PutOptions:
    """What a put records beside the bytes: kind, media type, label, lineage, expiry and whether
    to digest."""
    kind: str
    media_type: str = "application/octet-stream"
    label: str | None = None
    ttl: float | None = None
    """Seconds this artifact lives; None takes the adapter's retention default."""
    digest: bool = False
    """Record a sha-256 digest at put, which `get` and `get_stream` re-verify."""
    parent_refs: tuple[str, ...] = field(default_factory=tuple)
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)
    """Free JSON-serializable metadata for later layers (version, source)."""

    def __post_init__(self) -> None:
        if not self.kind:
            raise InvalidValue("PutOptions.kind must be a non-empty string such as 'dataset/rows'")
        if self.ttl is not None and self.ttl <= 0:
            raise InvalidValue(f"PutOptions.ttl must be positive seconds, got {self.ttl!r}")


class ArtifactError(OperatorError):
    """Base of the store's developer-facing errors."""


class ArtifactIntegrityError(ArtifactError):
    """A read found bytes that do not match their record (size, or the sha-256 recorded at
    `put`), or a record that no longer parses."""


class ArtifactSizeMismatchError(ArtifactError):
    """A streamed put delivered a different number of bytes than it declared; nothing was kept."""


class ArtifactTooLargeError(ArtifactError):
    """A single payload exceeds the scope's byte ceiling, so no eviction could make room."""


class StoreUnavailableError(ArtifactError):
    """The store's backend cannot be reached or its dependency is not installed."""


class StoreURLError(ArtifactError, ValueError):
    """A store URL names no adapter, or carries an option the adapter does not know."""


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

    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        """Store `data` under a new ref in `scope`, applying retention; returns its metadata."""

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref` in `scope`, or None when it is absent, expired or another
        scope's."""

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        """The artifact `ref` in `scope` with its bytes verified, or None when absent; raises
        `ArtifactIntegrityError` for damaged bytes."""

    def delete(self, scope: Scope, ref: str) -> bool:
        """Remove `ref` from `scope`; returns whether it was there."""

    def list(
        self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
        limit: int | None = None,
    ) -> ArtifactPage:
        """One page of `scope`'s live artifacts, newest first, optionally of one `kind`,
        continuing from `cursor`."""

    def close(self) -> None:
        """Release connections and handles; the store is not used afterwards."""


@runtime_checkable
class PutStreamStore(ArtifactStore, Protocol):
    """A store that can also take a payload as chunks without holding it whole."""
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        """Store a payload that never sits whole in memory. `declared_bytes` is stated, not
        measured: retention plans with it, and a stream that delivers more or fewer bytes is
        refused (`ArtifactSizeMismatchError`) with nothing kept."""
        ...


@runtime_checkable
class GetStreamStore(ArtifactStore, Protocol):
    """A store that can also hand a payload out as verified chunks."""
    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        """Read a payload as chunks without holding it whole. Size and `meta.digest` are
        verified while streaming; the last chunk is held back until they match, and a mismatch
        raises `ArtifactIntegrityError` from the iterator instead of yielding it."""
        ...


CanPutStream = PutStreamStore
CanGetStream = GetStreamStore


def can_put_stream(store: object) -> TypeGuard[PutStreamStore]:
    """Feature detection: narrows to the streaming-put shape when the member exists."""
    return callable(getattr(store, "put_stream", None))


def can_get_stream(store: object) -> TypeGuard[GetStreamStore]:
    """Feature detection: narrows to the streaming-get shape when the member exists."""
    return callable(getattr(store, "get_stream", None))


def parse_record(raw: bytes | str, where: str) -> ArtifactMeta:
    """Decode a stored JSON record; a damaged one is an integrity error naming where it lives."""
    try:
        decoded = msgspec.json.decode(raw)
        if not isinstance(decoded, dict):
            raise TypeError("not an object")
        return ArtifactMeta.from_json(decoded)
    except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
        raise ArtifactIntegrityError(
            f"The artifact record at {where!r} is damaged ({exc}); delete that artifact or restore "
            "it from a backup."
        ) from None


def sha256_digest(data: bytes) -> str:
    """The `sha256:<hex>` digest of `data`, as records carry it."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verify(meta: ArtifactMeta, data: bytes) -> None:
    """What `get` checks before handing bytes back: the recorded size, then the opt-in digest."""
    if len(data) != meta.bytes:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} failed its integrity check: {len(data):,} bytes are stored "
            f"but its record says {meta.bytes:,}. Re-create it; do not trust this copy."
        )
    if meta.digest is not None and sha256_digest(data) != meta.digest:
        raise ArtifactIntegrityError(
            f"Artifact {meta.ref!r} failed its integrity check: stored bytes do not match "
            f"{meta.digest!r}. Re-create it; do not trust this copy."
        )
