"""The file adapter (`file://DIR`): the embedded default (`.byref/` in the working directory).

Layout: `<root>/artifacts/<scope key>/<ref>.bin` beside `<ref>.json`. The scope key is a sha-256
of the exact scope values, so scopes differing only in case, separators, `..`, `%2F` or unicode
normalization never share a directory, on any disk. The law: writes go to a temporary file and are
renamed into place, and the metadata file (written last) is what makes an artifact exist, so a
crash never leaves a partial artifact visible. Retention runs under a per-scope lock file, so
several processes may write one scope. Temporary files are named after their writer
(`.incoming-<host>-<pid>-…`), so opening the store (across scopes) and listing a scope remove
those a crashed writer on this host left behind, and never one that a live writer (or another
host) is still filling. A read by ref touches only its own scope's directory, so a made-up ref
costs the same as another scope's real one (no timing oracle). A damaged record is skipped by
`list` and by retention, and reported, so one bad file never breaks its scope.
"""

from __future__ import annotations

import builtins
import dataclasses
import fcntl
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec

from byref.events import Emitter
from byref.store.kit import (
    Meter,
    Stamp,
    damaged,
    evicted,
    new_meta,
    paginate,
    refused,
    verified,
)
from byref.store.port import (
    Artifact,
    ArtifactIntegrityError,
    ArtifactMeta,
    ArtifactPage,
    PutOptions,
    Scope,
    StreamedArtifact,
    is_key,
    parse_record,
    verify,
)
from byref.store.retention import Retention, is_expired, plan_evictions, refuse_oversize

_CHUNK = 1 << 20


class FileStore:
    """The `file://` adapter: one JSON record and one payload file per artifact under `root`,
    safe across threads and processes."""
    def __init__(
        self,
        root: str | Path = ".byref",
        *,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
        emit: Emitter | None = None,
        fsync: bool = True,
    ) -> None:
        self.root = Path(root)
        self.retention = retention or Retention()
        self.clock = clock
        self.emit = emit or Emitter(clock=clock)
        self.fsync = fsync
        self._lock = threading.RLock()
        self._stamp = Stamp()
        _reap_all(self.root / "artifacts")

    @property
    def url(self) -> str:
        """The URL that reopens this store."""
        return "file://" + str(self.root.absolute())

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        """Store `data` under a new ref in `scope`, applying retention; returns its metadata."""
        return self.put_stream(scope, [bytes(data)], len(data), options)

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        """The metadata of `ref` in `scope`, or None when it is absent, expired or another
        scope's."""
        return self._live(scope, ref)

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        """The artifact `ref` in `scope` with its bytes verified, or None when absent; raises
        `ArtifactIntegrityError` for damaged bytes."""
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            data = self._payload(scope, ref).read_bytes()
        except FileNotFoundError:  # deleted between the two reads
            refused(self.emit, scope, ref, "deleted")
            return None
        verify(meta, data)
        return Artifact(meta, data)

    def delete(self, scope: Scope, ref: str) -> bool:
        """Remove `ref` from `scope`; returns whether it was there."""
        if not is_key(ref):
            return False
        with self._scope_lock(scope, create=False) as locked:
            if not locked:
                return False
            existed = self._meta_path(scope, ref).exists()
            self._meta_path(scope, ref).unlink(missing_ok=True)
            self._payload(scope, ref).unlink(missing_ok=True)
        return existed

    def list(
        self, scope: Scope, kind: str | None = None, *, cursor: str | None = None,
        limit: int | None = None,
    ) -> ArtifactPage:
        """One page of `scope`'s live artifacts, newest first, optionally of one `kind`,
        continuing from `cursor`."""
        return paginate(self._sweep(scope), kind, cursor, limit)

    def close(self) -> None:
        """Nothing to release: files are opened per call."""
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        """Stream into a temporary file, then rename into place; nothing is visible until the
        metadata file lands, and a size mismatch keeps nothing."""
        refuse_oversize(declared_bytes, self.retention)
        directory = self._dir(scope)
        directory.mkdir(parents=True, exist_ok=True)
        meter = Meter(declared_bytes, digest=options.digest)
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(".incoming-"))
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in meter.feed(chunks):
                    fh.write(chunk)
                if self.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            with self._scope_lock(scope, create=True):
                meta = new_meta(
                    options, meter.count, meter.digest, self._stamp(self.clock()), self.retention)
                live = self._sweep(scope) if self.retention.bounded else []
                gone = plan_evictions(live, meter.count, self.retention)
                for ref in gone:
                    self._unlink(scope, ref)
                os.replace(tmp, self._payload(scope, meta.ref))
                self._atomic_write(self._meta_path(scope, meta.ref), msgspec.json.encode(
                    meta.to_json()))
        finally:
            tmp.unlink(missing_ok=True)
        self.emit("minted", ref=meta.ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return dataclasses.replace(meta, evicted=evicted(self.emit, scope, gone))

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        """Chunks read from disk, size- and digest-checked as they pass (last chunk held back)."""
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            fh = self._payload(scope, ref).open("rb")
        except FileNotFoundError:
            refused(self.emit, scope, ref, "deleted")
            return None
        return StreamedArtifact(meta, verified(meta, _read_chunks(fh)))

    # -- internals -----------------------------------------------------------------------------
    def _dir(self, scope: Scope) -> Path:
        return self.root / "artifacts" / scope.key()

    def _payload(self, scope: Scope, ref: str) -> Path:
        return self._dir(scope) / f"{ref}.bin"

    def _meta_path(self, scope: Scope, ref: str) -> Path:
        return self._dir(scope) / f"{ref}.json"

    @contextmanager
    def _scope_lock(self, scope: Scope, *, create: bool) -> Iterator[bool]:
        """Thread lock plus an advisory file lock, so processes sharing a root serialize."""
        directory = self._dir(scope)
        if not directory.is_dir() and not create:
            yield False
            return
        directory.mkdir(parents=True, exist_ok=True)
        with self._lock, (directory / ".lock").open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield True
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read_meta(self, path: Path) -> ArtifactMeta | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return parse_record(raw, str(path))

    def _sweep(self, scope: Scope) -> builtins.list[ArtifactMeta]:
        """Live metadata of a scope; expired artifacts found on the way are removed, damaged
        records skipped and reported."""
        directory, now, live = self._dir(scope), self.clock(), []
        if not directory.is_dir():
            return []
        _reap_orphans(directory)
        for path in directory.glob("art_*.json"):
            try:
                meta = self._read_meta(path)
            except ArtifactIntegrityError as exc:
                damaged(self.emit, scope, path.stem, exc)
                continue
            if meta is None:
                continue
            if is_expired(meta, now):
                self._unlink(scope, meta.ref)
                self.emit("expired", ref=meta.ref, scope=str(scope))
            else:
                live.append(meta)
        return live

    def _live(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        if not is_key(ref):
            refused(self.emit, scope, ref, "malformed-ref")
            return None
        meta = self._read_meta(self._meta_path(scope, ref))
        if meta is not None and is_expired(meta, self.clock()):
            self._unlink(scope, ref)
            self.emit("expired", ref=ref, scope=str(scope))
            refused(self.emit, scope, ref, "expired")
            return None
        if meta is None:
            # Only this scope's directory is looked at: asking the others would make a made-up
            # ref cost O(scopes) and answer slower than another scope's real one.
            refused(self.emit, scope, ref, "absent")
        return meta

    def _unlink(self, scope: Scope, ref: str) -> None:
        self._meta_path(scope, ref).unlink(missing_ok=True)
        self._payload(scope, ref).unlink(missing_ok=True)

    def _atomic_write(self, path: Path, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(".meta-"))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if self.fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)


_TEMP_PREFIXES = (".incoming-", ".meta-")


def _temp_prefix(kind: str) -> str:
    """`.incoming-<host>-<pid>-`: who is writing the file (the pid is read per call: a forked
    child is another writer)."""
    return f"{kind}{socket.gethostname()}-{os.getpid()}-"


def _reap_all(artifacts: Path) -> None:
    """At open: crash litter of dead writers on this host, in every scope (a killed writer's
    temporary file may hold a whole payload, and its scope may never be listed again)."""
    try:
        scopes = [e.path for e in os.scandir(artifacts) if e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return
    for directory in scopes:
        try:
            _reap_orphans(Path(directory))
        except OSError:  # a scope vanishing or unreadable mid-sweep must not stop the open
            continue


def _reap_orphans(directory: Path) -> None:
    """Removes temporary files whose writer on this host is no longer running."""
    host = socket.gethostname()
    for path in directory.glob(".*-*"):
        kind = next((k for k in _TEMP_PREFIXES if path.name.startswith(k)), None)
        if kind is None:
            continue
        writer, _, pid_text = path.name[len(kind):].rpartition("-")[0].rpartition("-")
        if writer != host or not pid_text.isdigit() or _running(int(pid_text)):
            continue
        path.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _read_chunks(fh: object) -> Iterator[bytes]:
    import io

    assert isinstance(fh, io.BufferedReader)
    with fh:
        while chunk := fh.read(_CHUNK):
            yield chunk
