"""A run as the lens shows it: its transcript, its trace, and the store it minted into.

Owns reading a run directory (as `byref demo --out` writes it: `transcript.jsonl`,
`trace.jsonl`, `store/`, `report.json`) into a `Run`, without writing a byte of it: the
transcript is copied into memory (opening the file as a `Transcript` would repair a torn tail
in place), the trace is read line by line, and the store is reached through `ReadOnlyStore`
only. A `Run` can equally be made from a live transcript and store (the gateway's), so both
pages share one model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec

from byref.errors import DeveloperError
from byref.lens.reading.readonly import ReadOnlyStore
from byref.refs import Blob, Ref
from byref.resolve import Resolver
from byref.store import ArtifactMeta, ArtifactStore, FileStore, Scope, is_key
from byref.transcript import Part, Transcript

TRANSCRIPT = "transcript.jsonl"
TRACE = "trace.jsonl"
STORE = "store"
REPORT = "report.json"
"""The run's own figures, when the command that made it wrote them (`byref demo --out`)."""


class RunDirectoryError(DeveloperError, ValueError):
    """The path given to the lens is not a run directory (developer-facing: says what to pass)."""


@dataclass
class Run:
    """One run: the record, the operator's events, and read-only access to its artifacts."""

    transcript: Transcript
    events: list[dict[str, Any]]
    store: ReadOnlyStore | None
    source: str
    ref_scopes: dict[str, Scope] = field(default_factory=dict)
    """Which scope minted each ref (from `minted` events); others are tried in every scope."""
    gaps: list[str] = field(default_factory=list)
    """What this run directory lacks, said on the page instead of leaving a blank."""
    report: dict[str, Any] | None = None
    """The run's own report (`report.json`): its ledger and the naive side it was compared
    with, shown as the command printed them."""

    @property
    def scopes(self) -> list[Scope]:
        """The run's store scopes, sorted."""
        return sorted(self.store.scopes, key=str) if self.store is not None else []

    def head(self, ref: str) -> tuple[Scope, ArtifactMeta] | None:
        """The artifact `ref` names in one of this run's scopes, or None (one absence)."""
        if self.store is None or not is_key(ref):
            return None
        known = self.ref_scopes.get(ref)
        for scope in [known] if known is not None else self.scopes:
            meta = self.store.head(scope, ref)
            if meta is not None:
                return scope, meta
        return None

    def get(self, ref: str) -> tuple[ArtifactMeta, bytes] | None:
        """The record and bytes of `ref` in whichever run scope holds it, or None."""
        found = self.head(ref)
        if found is None or self.store is None:
            return None
        artifact = self.store.get(found[0], ref)
        return None if artifact is None else (artifact.meta, artifact.data)

    def resolver(self, scope: Scope | None = None) -> Resolver:
        """A resolver over this run's record; the store it sees is the read-only view (the
        resolver calls `head` and `get`, and feature-detects streaming, which the view lacks)."""
        picked = scope or (self.scopes[0] if self.scopes else Scope("lens"))
        return Resolver(self.transcript, cast(ArtifactStore, self.store), picked)

    def scope_of(self, ref: Ref) -> Scope | None:
        """The scope a ref's bytes live in, following a recipe's source down to its Blob key."""
        while not (isinstance(ref, Blob) and ref.key is not None):
            source = getattr(ref, "source", None)
            if source is None:
                return None
            ref = source
        found = self.head(ref.key)
        return found[0] if found else None


def load_run(path: str | Path, *, store: ArtifactStore | None = None,
             scopes: list[Scope] | None = None) -> Run:
    """Read the run directory at `path`. `store` replaces `path/store` (e.g. a store URL);
    `scopes` replaces the scopes named by the trace's events."""
    root = Path(path)
    if not root.is_dir():
        raise RunDirectoryError(
            f"{str(root)!r} is not a directory. Pass a run directory, as `byref demo --out DIR` "
            "writes it (transcript.jsonl, trace.jsonl, store/)."
        )
    gaps: list[str] = []
    transcript_path = root / TRANSCRIPT
    if not transcript_path.is_file():
        raise RunDirectoryError(
            f"{str(root)!r} has no {TRANSCRIPT}. Pass a run directory, as `byref demo --out DIR` "
            "writes it."
        )
    transcript = copy_transcript(transcript_path)
    events = read_trace(root / TRACE)
    if not (root / TRACE).is_file():
        gaps.append(f"No {TRACE}: events (mints, refusals, searches) cannot be shown.")
    ref_scopes: dict[str, Scope] = {}
    named: set[Scope] = set(scopes or ())
    for event in events:
        scope = parse_scope(event.get("scope"))
        if scope is None:
            continue
        if scopes is None:
            named.add(scope)
        ref = event.get("ref")
        if event.get("event") == "minted" and isinstance(ref, str):
            ref_scopes[ref] = scope
    view: ReadOnlyStore | None = None
    if store is None and (root / STORE).is_dir():
        store = FileStore(root / STORE)
    if store is None:
        gaps.append(f"No {STORE}/ directory: artifacts can be named but not shown.")
    elif not named:
        gaps.append("The trace names no scope, so no artifact can be read (pass --scope).")
    if store is not None:
        view = ReadOnlyStore(store, named)
    return Run(transcript, events, view, str(root), ref_scopes, gaps, read_report(root / REPORT))


def read_report(path: Path) -> dict[str, Any] | None:
    """The run's report, when it has one that parses as a JSON object."""
    if not path.is_file():
        return None
    try:
        report = msgspec.json.decode(path.read_bytes())
    except msgspec.DecodeError:
        return None
    return report if isinstance(report, dict) else None


def copy_transcript(path: Path) -> Transcript:
    """The persisted transcript, copied line by line into an in-memory one (a torn last line,
    never acknowledged, is left out, as `Transcript(path)` would, but the file is not touched)."""
    with path.open("rb") as fh:
        return transcript_of(fh)


def transcript_of(lines: Iterable[bytes], origin: int = 0) -> Transcript:
    """An in-memory transcript of recorded lines (the first line's seq is its origin; `origin`
    when there are none); reading stops at a line without its newline (never acknowledged)."""
    decoder = msgspec.json.Decoder()
    copy: Transcript | None = None
    for line in lines:
        if not line.endswith(b"\n"):
            break
        raw = decoder.decode(line)
        if copy is None:
            copy = Transcript(origin=int(raw["seq"]))
        copy.append(raw["role"], [Part.from_json(p) for p in raw["parts"]])
    return copy if copy is not None else Transcript(origin=origin)


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The events of the run's JSON Lines trace (none when the file is missing)."""
    if not path.is_file():
        return []
    out: list[dict[str, Any]] = []
    decoder = msgspec.json.Decoder()
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                event = decoder.decode(line)
            except msgspec.DecodeError:
                continue  # a torn last line of a trace still being written
            if isinstance(event, dict):
                out.append(event)
    return out


def parse_scope(text: object) -> Scope | None:
    """`tenant/principal/conversation` as events write it; anything else is not a scope."""
    if not isinstance(text, str):
        return None
    parts = text.split("/")
    if len(parts) != 3:
        return None
    try:
        return Scope(*parts)
    except ValueError:
        return None
