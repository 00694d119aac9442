"""The result catalog: what material is in scope for the model, and how to address it.

Owns the navigation view of kept results: per entry its ref, kind, fields, row count, size,
acquisition time and label, from the store's metadata alone (`list`/`head`, never `get`). Kept
versions (`result/<tool>`) carry their shape; placed results (`tool-result/<tool>`) and other
artifacts carry kind, size and label only.

The law: a catalog entry says material exists, not that the model read it (the rendering says so
in words); the catalog is auxiliary, so it is fitted to its byte budget and says how many entries
it left out, never silently shortened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from byref.jsonview import dumps
from byref.reads.versions import ResultVersion
from byref.store import ArtifactMeta, ArtifactStore, Scope

CATALOG_HEAD: Final = (
    "Results you can read by ref (read_result(ref, fields?, offset?, limit?, max_bytes?)). "
    "An entry says the material exists, not that you have read it."
)


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One stored result as the catalog lists it: ref, kind, size, when acquired, and its fields
    and row count when known."""
    ref: str
    kind: str
    bytes: int
    acquired_at: float
    label: str | None = None
    fields: tuple[str, ...] | None = None
    row_count: int | None = None
    version: int | None = None

    @staticmethod
    def of(meta: ArtifactMeta) -> CatalogEntry:
        """The entry for a stored artifact, using its result version when it has one."""
        v = ResultVersion.from_meta(meta)
        if v is None:
            return CatalogEntry(meta.ref, meta.kind, meta.bytes, meta.created_at, meta.label)
        return CatalogEntry(meta.ref, meta.kind, meta.bytes, v.acquired_at, meta.label,
                            v.fields, v.row_count, v.number)

    def to_json(self) -> dict[str, Any]:
        """The entry as the model sees it (unknown fields left out)."""
        out: dict[str, Any] = {"resultRef": self.ref, "kind": self.kind, "bytes": self.bytes,
                               "acquiredAt": round(self.acquired_at, 3)}
        if self.label:
            out["label"] = self.label
        if self.fields is not None:
            out["fields"] = list(self.fields)
        if self.row_count is not None:
            out["rowCount"] = self.row_count
        if self.version is not None:
            out["version"] = self.version
        return out


class ResultCatalog:
    """The catalog of one store scope, newest first."""

    def __init__(self, store: ArtifactStore, scope: Scope, *,
                 kinds: tuple[str, ...] | None = None) -> None:
        self.store = store
        self.scope = scope
        self.kinds = kinds
        """Kind prefixes to list (None: every artifact in scope)."""

    def entries(self, limit: int = 200) -> list[CatalogEntry]:
        """Up to `limit` entries, newest first, of the catalog's kinds."""
        out: list[CatalogEntry] = []
        cursor: str | None = None
        while len(out) < limit:
            page = self.store.list(self.scope, None, cursor=cursor, limit=min(200, limit))
            for meta in page:
                if self.kinds is None or meta.kind.startswith(self.kinds):
                    out.append(CatalogEntry.of(meta))
            cursor = page.next_cursor
            if cursor is None:
                break
        return out[:limit]

    def render(self, max_bytes: int, *, limit: int = 200) -> str:
        """The catalog as text within `max_bytes`: whole entries, then how many were left out."""
        return fit_lines(CATALOG_HEAD, [dumps(e.to_json()) for e in self.entries(limit)],
                         max_bytes, what="results")


def fit_lines(head: str, lines: list[str], max_bytes: int, *, what: str) -> str:
    """`head` then as many whole `lines` as fit, then a line counting the ones left out."""
    out = [head]
    used = len(head.encode())
    for i, line in enumerate(lines):
        rest = len(lines) - i
        tail = f"… {rest:,} more {what} not listed."
        cost = len(line.encode()) + 1
        # Keep room for the tail line unless this is the last entry.
        reserve = 0 if rest == 1 else len(tail.encode()) + 1
        if used + cost + reserve > max_bytes:
            out.append(tail)
            break
        out.append(line)
        used += cost
    return "\n".join(out)
