"""Store URLs select an adapter: `file://.byref`, `memory://` (more adapters register here)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from byref.store.port import ArtifactStore
from byref.store.retention import Retention

SUPPORTED = ("file://", "memory://")


def open_store(url: str = "file://.byref", *, retention: Retention | None = None) -> ArtifactStore:
    parts = urlsplit(url)
    if parts.scheme == "memory":
        from byref.store.memory import MemoryStore

        return MemoryStore(retention=retention)
    if parts.scheme == "file":
        from byref.store.file import FileStore

        # file://.byref is relative (netloc holds the first segment); file:///abs is absolute.
        return FileStore(Path(parts.netloc + parts.path or ".byref"), retention=retention)
    raise ValueError(
        f"Unknown store URL {url!r}; use one of: {', '.join(SUPPORTED)} (for example file://.byref)."
    )
