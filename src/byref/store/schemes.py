"""The store scheme registry: which adapter opens a store URL, byref's own or a package's.

The law: one table answers "what opens `gcs://…`?" for `open_store`, the conformance battery
and the CLI alike. A third-party adapter joins without byref knowing it: its package declares
an entry point in the `byref.stores` group, named by the scheme, whose object is a
`StoreScheme` (or calls `register_scheme` at run time):

    [project.entry-points."byref.stores"]
    gcs = "byref_gcs:SCHEME"        # SCHEME = StoreScheme("gcs://bucket/prefix", open_gcs)

An entry point is loaded only when its scheme is opened, so an installed adapter costs nothing
until used. Nothing here is for tests: how the conformance battery damages a scheme's stores
is registered beside it, in `byref.store.conformance.corruption`.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult

from byref.errors import InvalidValue
from byref.events import Emitter
from byref.store.port import ArtifactStore, StoreURLError
from byref.store.retention import Retention

ENTRY_POINT_GROUP = "byref.stores"


@dataclass
class StoreURL:
    """A store URL taken apart for an opener. `query` holds the options not yet consumed
    (retention is already parsed out); an opener pops what it knows and calls `no_more()`."""

    url: str
    parts: SplitResult
    query: dict[str, str]
    retention: Retention | None
    clock: Callable[[], float]
    emit: Emitter | None

    @property
    def common(self) -> dict[str, Any]:
        """The keyword arguments every byref adapter takes."""
        return {"retention": self.retention, "clock": self.clock, "emit": self.emit}

    def no_more(self) -> None:
        """Refuse options the opener did not consume, naming the accepted ones."""
        if self.query:
            raise StoreURLError(
                f"Store URL {self.url!r} has options this adapter does not know: "
                f"{', '.join(sorted(self.query))}; accepted: ttl, max_bytes, max_count."
            )


@dataclass(frozen=True)
class StoreScheme:
    """One URL scheme: the form shown in errors (`form`) and the function opening a store from a
    parsed URL (`open`)."""

    form: str
    open: Callable[[StoreURL], ArtifactStore]
    name: str = field(default="", compare=False)


BUILTIN: dict[str, StoreScheme] = {}
"""byref's own schemes (filled by `byref.store.open`)."""

_registered: dict[str, StoreScheme] = {}
_lock = threading.Lock()


def register_scheme(name: str, scheme: StoreScheme) -> None:
    """Make `name://…` URLs open with `scheme` (for adapters not packaged with an entry point)."""
    if not name.isidentifier() or name.lower() != name:
        raise InvalidValue(f"Store scheme {name!r} must be a lower-case identifier, e.g. 'gcs'.")
    if name in BUILTIN:
        raise InvalidValue(f"Store scheme {name!r} is byref's own; register another name.")
    with _lock:
        _registered[name] = scheme


def find_scheme(name: str) -> StoreScheme | None:
    """The scheme registered as `name`: byref's own, then `register_scheme`, then entry points."""
    hit = BUILTIN.get(name) or _registered.get(name)
    if hit is not None or not name:
        return hit
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        loaded = point.load()
        if not isinstance(loaded, StoreScheme):
            raise StoreURLError(
                f"The {ENTRY_POINT_GROUP!r} entry point {name!r} ({point.value!r}) is not a "
                f"StoreScheme but {type(loaded).__name__!r}; its package is broken."
            )
        with _lock:
            _registered.setdefault(name, loaded)
        return loaded
    return None


def registered_schemes() -> list[StoreScheme]:
    """Schemes registered beside byref's own (entry points that have been loaded included)."""
    with _lock:
        return list(_registered.values())
