"""The lens's only door to the artifact store: `head` and `get`, for the scopes it was given.

The law: read-only by construction. `ReadOnlyStore` has no `put`, `delete`, `list` or
`put_stream` member to call, and it keeps the store it wraps in a slot the page code never
names, so a page cannot write, delete or enumerate even by mistake. A scope outside the granted
set answers `None`, the store's own single absence, so a page cannot probe another scope.
"""

from __future__ import annotations

from collections.abc import Iterable

from byref.store import Artifact, ArtifactMeta, ArtifactStore, Scope


class ReadOnlyStore:
    """`head` and `get` over `store`, answering only for `scopes` (exact comparison)."""

    __slots__ = ("__scopes", "__store")

    def __init__(self, store: ArtifactStore, scopes: Iterable[Scope]) -> None:
        self.__store = store
        self.__scopes = frozenset(scopes)

    @property
    def scopes(self) -> frozenset[Scope]:
        """The scopes this view may read."""
        return self.__scopes

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref`, or None outside the allowed scopes."""
        if scope not in self.__scopes:
            return None
        return self.__store.head(scope, ref)

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        """The artifact `ref`, or None outside the allowed scopes."""
        if scope not in self.__scopes:
            return None
        return self.__store.get(scope, ref)
