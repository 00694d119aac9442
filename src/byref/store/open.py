"""Store URLs select an adapter; the law: an unknown scheme or option is a clear error naming the
accepted forms, and a backend's dependency is imported only when its URL is opened.

    memory://                               in-process, bounded
    file://.byref   file:///abs/dir         the embedded default
    sqlite:///relative.db   sqlite:////abs.db
    postgresql://user@host:5432/db          (extra: byref[postgres])
    s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1   (extra: byref[s3])

Every URL also takes retention options: `ttl` (seconds), `max_bytes`, `max_count` (per scope);
`table` names the SQL adapters' table prefix; `fsync=0` relaxes the file adapter's durability.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from byref.events import Emitter
from byref.store.port import ArtifactStore, StoreURLError
from byref.store.retention import Retention

SUPPORTED = ("memory://", "file://DIR", "sqlite:///PATH", "postgresql://…", "s3://bucket/prefix")
_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,40}")


def open_store(
    url: str = "file://.byref",
    *,
    retention: Retention | None = None,
    clock: Callable[[], float] = time.time,
    emit: Emitter | None = None,
) -> ArtifactStore:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    retention = _retention(url, query, retention)
    common = {"retention": retention, "clock": clock, "emit": emit}
    scheme = parts.scheme
    if scheme == "memory":
        from byref.store.memory import MemoryStore

        _no_more(url, query)
        return MemoryStore(**common)  # type: ignore[arg-type]
    if scheme == "file":
        from byref.store.file import FileStore

        fsync = query.pop("fsync", "1") not in ("0", "false", "no")
        _no_more(url, query)
        # file://.byref is relative (netloc holds the first segment); file:///abs is absolute.
        root = Path(parts.netloc + parts.path or ".byref")
        return FileStore(root, fsync=fsync, **common)  # type: ignore[arg-type]
    if scheme == "sqlite":
        from byref.store.sqlite import SqliteStore

        table = _table(url, query)
        _no_more(url, query)
        if not parts.path.lstrip("/"):
            raise StoreURLError(
                f"Store URL {url!r} names no database file; write sqlite:///relative.db or "
                "sqlite:////absolute/path.db (use memory:// for an in-process store)."
            )
        return SqliteStore(parts.path[1:], table=table, **common)  # type: ignore[arg-type]
    if scheme in ("postgresql", "postgres"):
        from byref.store.postgres import PostgresStore

        table = _table(url, query)
        conninfo = urlunsplit(parts._replace(query=urlencode(query)))
        return PostgresStore(conninfo, table=table, **common)  # type: ignore[arg-type]
    if scheme == "s3":
        from byref.store.s3 import S3Store

        if not parts.netloc:
            raise StoreURLError(f"Store URL {url!r} names no bucket; write s3://bucket/prefix.")
        return S3Store(parts.netloc, parts.path, config=query, **common)  # type: ignore[arg-type]
    raise StoreURLError(
        f"Unknown store URL {url!r}; use one of: {', '.join(SUPPORTED)} (for example file://.byref)."
    )


def _retention(url: str, query: dict[str, str], given: Retention | None) -> Retention | None:
    names = {"ttl": "ttl", "max_bytes": "max_bytes_per_scope", "max_count": "max_count_per_scope"}
    if not any(k in query for k in names):
        return given
    values: dict[str, float | int | None] = {}
    for key, field_name in names.items():
        raw = query.pop(key, None)
        if raw is None:
            values[field_name] = getattr(given, field_name) if given else None
            continue
        try:
            values[field_name] = float(raw) if key == "ttl" else int(raw)
        except ValueError:
            raise StoreURLError(
                f"Store URL {url!r}: {key}={raw!r} is not a number; write e.g. {key}=3600."
            ) from None
    try:
        return Retention(**values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise StoreURLError(f"Store URL {url!r}: {exc}") from None


def _table(url: str, query: dict[str, str]) -> str:
    table = query.pop("table", "byref")
    if not _TABLE.fullmatch(table):
        raise StoreURLError(
            f"Store URL {url!r}: table={table!r} is not a plain lower-case SQL name; use letters, "
            "digits and underscores, starting with a letter."
        )
    return table


def _no_more(url: str, query: dict[str, str]) -> None:
    if query:
        raise StoreURLError(
            f"Store URL {url!r} has options this adapter does not know: "
            f"{', '.join(sorted(query))}; accepted: ttl, max_bytes, max_count."
        )
