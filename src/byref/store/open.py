"""Store URLs select an adapter; the law: an unknown scheme or option is a clear error naming the
accepted forms, and a backend's dependency is imported only when its URL is opened.

    memory://                               in-process, bounded
    file://.byref   file:///abs/dir         the embedded default
    sqlite:///relative.db   sqlite:////abs.db
    postgresql://user@host:5432/db          (extra: byref[postgres])
    s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1   (extra: byref[s3])

Every URL also takes retention options: `ttl` (seconds), `max_bytes`, `max_count` (per scope);
`table` names the SQL adapters' table prefix; `fsync=0` relaxes the file adapter's durability.
Other schemes join through `byref.store.schemes` (an entry point or `register_scheme`).
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
from byref.store.schemes import BUILTIN, StoreScheme, StoreURL, find_scheme, registered_schemes

SUPPORTED = ("memory://", "file://DIR", "sqlite:///PATH", "postgresql://…", "s3://bucket/prefix")
_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,40}")


def open_store(
    url: str = "file://.byref",
    *,
    retention: Retention | None = None,
    clock: Callable[[], float] = time.time,
    emit: Emitter | None = None,
) -> ArtifactStore:
    """The store a URL names. Its scheme picks the adapter: byref's own, or one a package
    registers (`register_scheme`, or the `byref.stores` entry-point group)."""
    parts = urlsplit(url)
    scheme = find_scheme(parts.scheme)
    if scheme is None:
        raise unknown_url(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    retention = _retention(url, query, retention)
    return scheme.open(StoreURL(url, parts, query, retention, clock, emit))


def unknown_url(url: str) -> StoreURLError:
    """The error for a URL no registered scheme opens, listing the accepted forms."""
    forms = [*SUPPORTED, *(s.form for s in registered_schemes())]
    return StoreURLError(
        f"Unknown store URL {url!r}; use one of: {', '.join(forms)} (for example file://.byref)."
    )


# -- byref's own schemes -----------------------------------------------------------------------
def _memory(u: StoreURL) -> ArtifactStore:
    from byref.store.adapters.memory import MemoryStore

    u.no_more()
    return MemoryStore(**u.common)


def _file(u: StoreURL) -> ArtifactStore:
    from byref.store.adapters.file import FileStore

    fsync = u.query.pop("fsync", "1") not in ("0", "false", "no")
    u.no_more()
    # file://.byref is relative (netloc holds the first segment); file:///abs is absolute.
    root = Path(u.parts.netloc + u.parts.path or ".byref")
    return FileStore(root, fsync=fsync, **u.common)


def _sqlite(u: StoreURL) -> ArtifactStore:
    from byref.store.adapters.sqlite import SqliteStore

    table = _table(u.url, u.query)
    u.no_more()
    if not u.parts.path.lstrip("/"):
        raise StoreURLError(
            f"Store URL {u.url!r} names no database file; write sqlite:///relative.db or "
            "sqlite:////absolute/path.db (use memory:// for an in-process store)."
        )
    return SqliteStore(u.parts.path[1:], table=table, **u.common)


def _postgres(u: StoreURL) -> ArtifactStore:
    from byref.store.adapters.postgres import PostgresStore

    table = _table(u.url, u.query)
    conninfo = urlunsplit(u.parts._replace(query=urlencode(u.query)))
    return PostgresStore(conninfo, table=table, **u.common)


def _s3(u: StoreURL) -> ArtifactStore:
    from byref.store.adapters.s3 import S3Store

    if not u.parts.netloc:
        raise StoreURLError(f"Store URL {u.url!r} names no bucket; write s3://bucket/prefix.")
    return S3Store(u.parts.netloc, u.parts.path, config=u.query,
                   **u.common)


BUILTIN.update({
    "memory": StoreScheme("memory://", _memory),
    "file": StoreScheme("file://DIR", _file),
    "sqlite": StoreScheme("sqlite:///PATH", _sqlite),
    "postgresql": StoreScheme("postgresql://…", _postgres),
    "postgres": StoreScheme("postgresql://…", _postgres),
    "s3": StoreScheme("s3://bucket/prefix", _s3),
})


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
