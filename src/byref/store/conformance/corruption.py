"""Damage staged beside a store's port: the conformance battery's `corrupt` and `rewrite` hooks.

The law: production adapters carry no test-only code. How to reach a scheme's stored payload
bytes without its verbs lives here, one `Damage` per scheme, and only the battery uses it.
byref's own schemes are built in; a third-party adapter joins like its opener does, either by
calling `register_damage` or through an entry point in the `byref.store_damage` group, named by
the scheme, whose object is a `Damage`:

    [project.entry-points."byref.store_damage"]
    gcs = "byref_gcs.testing:DAMAGE"   # DAMAGE = Damage(read_gcs_blob, write_gcs_blob)

A scheme with no `Damage` leaves the battery's damage hooks unsupplied, and the cases needing
them fail saying which hook is missing (or are declared with a reason).
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from byref.errors import InvalidValue
from byref.store.port import ArtifactStore, Scope, StoreURLError

if TYPE_CHECKING:
    from byref.store.adapters._sql import SqlStore

DAMAGE_ENTRY_POINT_GROUP = "byref.store_damage"


@dataclass(frozen=True)
class Damage:
    """Raw access to one scheme's stored payloads, beside the port: `read(store, scope, ref)`
    returns the bytes as stored, `write(store, scope, ref, data)` replaces them (any length)
    and keeps the artifact's record. Neither may verify anything: that is the port's job."""

    read: Callable[[Any, Scope, str], bytes]
    write: Callable[[Any, Scope, str, bytes], None]

    def corrupt(self, store: ArtifactStore, scope: Scope, ref: str) -> None:
        """Flip every bit of the payload's middle byte (the battery's `corrupt` hook)."""
        data = bytearray(self.read(store, scope, ref))
        data[len(data) // 2] ^= 0xFF
        self.write(store, scope, ref, bytes(data))

    def rewrite(self, store: ArtifactStore, scope: Scope, ref: str, data: bytes) -> None:
        """Replace the payload with `data`, keeping its record (the battery's `rewrite` hook)."""
        self.write(store, scope, ref, data)


# -- byref's own adapters; each reaches the storage its adapter already uses -------------------
def _memory_read(store: Any, scope: Scope, ref: str) -> bytes:
    with store._lock:
        return bytes(store._items[scope][ref][1])


def _memory_write(store: Any, scope: Scope, ref: str, data: bytes) -> None:
    with store._lock:
        meta, _ = store._items[scope][ref]
        store._items[scope][ref] = (meta, bytes(data))


def _file_read(store: Any, scope: Scope, ref: str) -> bytes:
    return bytes(store._payload(scope, ref).read_bytes())


def _file_write(store: Any, scope: Scope, ref: str, data: bytes) -> None:
    store._payload(scope, ref).write_bytes(data)


def _sql_read(store: SqlStore, scope: Scope, ref: str) -> bytes:
    with store._write() as tx:
        rows = tx.rows("SELECT data FROM {c} WHERE ref = ? ORDER BY seq", (ref,))
    return b"".join(bytes(row[0]) for row in rows)


def _sql_write(store: SqlStore, scope: Scope, ref: str, data: bytes) -> None:
    from byref.store.adapters._sql import CHUNK
    from byref.store.kit import regroup

    with store._write() as tx:
        tx.count("DELETE FROM {c} WHERE ref = ?", (ref,))
        for seq, piece in enumerate(regroup([data], CHUNK)):
            tx.count("INSERT INTO {c} (ref, seq, data) VALUES (?, ?, ?)", (ref, seq, piece))


def _s3_read(store: Any, scope: Scope, ref: str) -> bytes:
    return bytes(store._obs.get(store._store, store._bin(scope, ref)).bytes())


def _s3_write(store: Any, scope: Scope, ref: str, data: bytes) -> None:
    store._obs.put(store._store, store._bin(scope, ref), data, use_multipart=False)


_SQL = Damage(_sql_read, _sql_write)
BUILTIN_DAMAGE: dict[str, Damage] = {
    "memory": Damage(_memory_read, _memory_write),
    "file": Damage(_file_read, _file_write),
    "sqlite": _SQL,
    "postgresql": _SQL,
    "postgres": _SQL,
    "s3": Damage(_s3_read, _s3_write),
}
"""The damage for byref's own schemes, by scheme name."""

_registered: dict[str, Damage] = {}
_lock = threading.Lock()


def register_damage(scheme: str, damage: Damage) -> None:
    """Let the battery damage stores of `scheme` (for adapters without an entry point)."""
    if scheme in BUILTIN_DAMAGE:
        raise InvalidValue(f"Store scheme {scheme!r} is byref's own; its damage is built in.")
    with _lock:
        _registered[scheme] = damage


def find_damage(scheme: str) -> Damage | None:
    """The damage for `scheme`: byref's own, then `register_damage`, then entry points; `None`
    when its adapter ships none."""
    hit = BUILTIN_DAMAGE.get(scheme) or _registered.get(scheme)
    if hit is not None or not scheme:
        return hit
    for point in importlib.metadata.entry_points(group=DAMAGE_ENTRY_POINT_GROUP, name=scheme):
        loaded = point.load()
        if not isinstance(loaded, Damage):
            raise StoreURLError(
                f"The {DAMAGE_ENTRY_POINT_GROUP!r} entry point {scheme!r} ({point.value!r}) is "
                f"not a Damage but {type(loaded).__name__!r}; its package is broken."
            )
        with _lock:
            _registered.setdefault(scheme, loaded)
        return loaded
    return None
