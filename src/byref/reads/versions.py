"""Versioned results: a tool result kept for reading is an immutable version with its source.

Owns how results are kept, refreshed and reused. A version is one artifact in the run's store
(kind `result/<tool>`, JSON), its ref minted by the store, and its `metadata["byref.result"]`
records the source (tool, tool version, arguments, authorization scope), acquisition time, the
series it belongs to and its number in that series, plus what a read needs (record location,
fields, row count, id field, and what the source declared about its population).

The law: a version never changes. A refresh fetches again and keeps a new version, leaving the
old one readable by its exact ref; a failed refresh records the failure and answers the old
version's identity unchanged; an exact-version read reads the store and never refetches. Reuse
of an earlier fetch happens only when the caller opts in, matched on tool identity, arguments and
scope (the series key), never on a payload that merely looks the same.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from byref.jsonview import decode, encode
from byref.reads.limits import ReadLimits
from byref.reads.shape import describe
from byref.store import ArtifactMeta, ArtifactStore, PutOptions, Scope
from byref.store.port import ArtifactError

META_KEY: Final = "byref.result"
FAILURE_KIND: Final = "result-failure"


class ResultVersionError(ArtifactError):
    """A version cannot be kept or read; the text says which and what to do instead."""


@dataclass(frozen=True, slots=True)
class ResultVersion:
    """One kept version of a tool's result: the call that made it, its series and number, and
    what it holds."""
    ref: str
    tool: str
    arguments: dict[str, Any]
    scope: str
    acquired_at: float
    series: str
    number: int
    """1 for the first fetch of a series, 2 after one refresh, …"""
    bytes: int
    kind: str
    fields: tuple[str, ...] = ()
    row_count: int | None = None
    records_at: str = ""
    """JSON Pointer of the records inside the value ('' when the value is the array)."""
    id_field: str | None = None
    expected_total: int | None = None
    expected_ids: tuple[str, ...] | None = None
    previous: str | None = None
    label: str | None = None

    @staticmethod
    def from_meta(meta: ArtifactMeta) -> ResultVersion | None:
        """The version recorded in an artifact's metadata, or None for an artifact that is not a
        result version."""
        raw = meta.metadata.get(META_KEY)
        if not isinstance(raw, dict):
            return None
        ids = raw.get("expectedIds")
        return ResultVersion(
            ref=meta.ref, tool=raw["tool"], arguments=dict(raw.get("arguments") or {}),
            scope=raw["scope"], acquired_at=raw["acquiredAt"], series=raw["series"],
            number=raw["number"], bytes=meta.bytes, kind=meta.kind,
            fields=tuple(raw.get("fields") or ()), row_count=raw.get("rowCount"),
            records_at=raw.get("recordsAt", ""), id_field=raw.get("idField"),
            expected_total=raw.get("expectedTotal"),
            expected_ids=tuple(ids) if ids is not None else None,
            previous=raw.get("previous"), label=meta.label,
        )


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What a refresh produced: a new version, or the failure and the old version unchanged."""

    version: ResultVersion | None
    failed: bool = False
    error: str | None = None
    failure_ref: str | None = None


def series_key(tool: str, arguments: dict[str, Any], scope: Scope, tool_version: str = "") -> str:
    """The identity reuse matches on: tool, its version, canonical arguments and scope."""
    canonical = encode([tool, tool_version, _canonical(arguments), str(scope)])
    return "ser_" + hashlib.sha256(canonical).hexdigest()[:32]


class ResultVersions:
    """Keeps, refreshes and reads result versions in one store scope."""

    def __init__(
        self, store: ArtifactStore, scope: Scope, *, limits: ReadLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.scope = scope
        self.limits = limits or ReadLimits()
        self.clock = clock

    def keep(
        self, tool: str, arguments: dict[str, Any], value: Any, *, tool_version: str = "",
        id_field: str | None = None, expected_total: int | None = None,
        expected_ids: Sequence[str] | None = None, label: str | None = None,
        previous: ResultVersion | None = None,
    ) -> ResultVersion:
        """Store `value` as a new immutable version of the series (tool, arguments, scope)."""
        data = encode(value)
        if len(data) > self.limits.storage_bytes:
            raise ResultVersionError(
                f"The result of {tool!r} is {len(data):,} bytes, over the storage capacity of "
                f"{self.limits.storage_bytes:,} bytes per result; nothing was kept. Ask the "
                "tool for less (a narrower query or a page), or raise ReadLimits.storage_bytes."
            )
        series = series_key(tool, arguments, self.scope, tool_version)
        shape = describe(value)
        record = {
            "tool": tool, "toolVersion": tool_version, "arguments": _canonical(arguments),
            "scope": str(self.scope), "acquiredAt": self.clock(), "series": series,
            "number": previous.number + 1 if previous is not None else 1,
            "previous": previous.ref if previous is not None else None,
            "fields": list(shape.fields), "rowCount": shape.rows, "recordsAt": shape.path,
            "idField": id_field, "expectedTotal": expected_total,
            "expectedIds": list(expected_ids) if expected_ids is not None else None,
        }
        meta = self.store.put(self.scope, data, PutOptions(
            kind=f"result/{tool}", media_type="application/json",
            label=label or f"{tool} result", digest=True, metadata={META_KEY: record}))
        version = ResultVersion.from_meta(meta)
        assert version is not None
        return version

    def fetch(
        self, tool: str, arguments: dict[str, Any], fetcher: Callable[[], Any], *,
        reuse: bool = False, tool_version: str = "", **keep: Any,
    ) -> ResultVersion:
        """Fetch and keep a version; with `reuse=True` (opt-in) the latest version of the same
        series is answered instead, without calling `fetcher`."""
        if reuse:
            latest = self.latest(tool, arguments, tool_version=tool_version)
            if latest is not None:
                return latest
        return self.keep(tool, arguments, fetcher(), tool_version=tool_version, **keep)

    def refresh(self, version: ResultVersion, fetcher: Callable[[], Any], **keep: Any) -> Refreshed:
        """Fetch again and keep a new version; on failure record it and keep `version` as is."""
        try:
            value = fetcher()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            failure = self.store.put(self.scope, encode({"error": error}), PutOptions(
                kind=f"{FAILURE_KIND}/{version.tool}", media_type="application/json",
                label=f"failed refresh of {version.ref}", parent_refs=(version.ref,),
                metadata={"byref.failure": {"series": version.series, "kept": version.ref,
                                            "error": error, "at": self.clock()}}))
            return Refreshed(version, failed=True, error=error, failure_ref=failure.ref)
        tool_version = str(self._raw(version).get("toolVersion", ""))
        kept = self.keep(version.tool, version.arguments, value, tool_version=tool_version,
                         previous=version, **keep)
        return Refreshed(kept)

    def head(self, ref: str) -> ResultVersion | None:
        """The version stored as `ref`, or None when absent or not a version."""
        meta = self.store.head(self.scope, ref)
        return ResultVersion.from_meta(meta) if meta is not None else None

    def read(self, ref: str) -> Any:
        """The exact value of version `ref`, from the store only: never a refetch."""
        artifact = self.store.get(self.scope, ref)
        if artifact is None or ResultVersion.from_meta(artifact.meta) is None:
            raise ResultVersionError(
                f"Result version {ref!r} is not available (missing, expired, or not a kept "
                "result in this scope). It was not refetched: an exact version is only ever read "
                "as stored. Fetch again with the tool to get a new version."
            )
        return decode(artifact.data)

    def latest(self, tool: str, arguments: dict[str, Any], *,
               tool_version: str = "") -> ResultVersion | None:
        """The newest version of the series for `tool` called with `arguments`, or None."""
        series = series_key(tool, arguments, self.scope, tool_version)
        best: ResultVersion | None = None
        for version in self.all(tool):
            if version.series == series and (best is None or version.number > best.number):
                best = version
        return best

    def all(self, tool: str | None = None) -> list[ResultVersion]:
        """Every kept version in scope (of `tool`, if given), newest first."""
        out: list[ResultVersion] = []
        cursor: str | None = None
        while True:
            page = self.store.list(self.scope, None, cursor=cursor, limit=200)
            for meta in page:
                if tool is not None and meta.kind != f"result/{tool}":
                    continue
                version = ResultVersion.from_meta(meta)
                if version is not None:
                    out.append(version)
            cursor = page.next_cursor
            if cursor is None:
                return out

    def _raw(self, version: ResultVersion) -> dict[str, Any]:
        meta = self.store.head(self.scope, version.ref)
        raw = meta.metadata.get(META_KEY) if meta is not None else None
        return raw if isinstance(raw, dict) else {}


def _canonical(arguments: dict[str, Any]) -> dict[str, Any]:
    # Key order must not make two identical requests look different.
    canonical: dict[str, Any] = decode(encode(_sorted(arguments)))
    return canonical


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted(v) for v in value]
    return value
