"""The file adapter: the embedded default (`.byref/` in the working directory).

Layout: `<root>/artifacts/<scope>/<ref>.bin` beside `<ref>.json`. The scope directory name is the
hex of its UTF-8 parts, so scopes differing only in case stay separate on case-insensitive disks.
Writes go to a temporary file and are renamed into place: a reader sees a whole artifact or none,
and the metadata file (written last) is what makes an artifact exist.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import msgspec

from byref.events import Emitter
from byref.store.port import (
    Artifact,
    ArtifactMeta,
    ArtifactSizeMismatchError,
    PutOptions,
    Scope,
    StreamedArtifact,
    mint_ref,
    verify,
)
from byref.store.retention import Retention, expiry, is_expired, plan_evictions

_CHUNK = 1 << 16


class FileStore:
    def __init__(
        self,
        root: str | Path = ".byref",
        *,
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
        emit: Emitter | None = None,
    ) -> None:
        self.root = Path(root)
        self.retention = retention or Retention()
        self.clock = clock
        self.emit = emit or Emitter(clock=clock)
        self._lock = threading.RLock()

    # -- the five verbs ------------------------------------------------------------------------
    def put(self, scope: Scope, data: bytes, options: PutOptions) -> ArtifactMeta:
        return self.put_stream(scope, [bytes(data)], len(data), options)

    def head(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        return self._live(scope, ref)

    def get(self, scope: Scope, ref: str) -> Artifact | None:
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            data = self._payload(scope, ref).read_bytes()
        except FileNotFoundError:
            self.emit("refused", ref=ref, scope=str(scope), reason="missing-or-expired")
            return None
        verify(meta, data)
        return Artifact(meta, data)

    def delete(self, scope: Scope, ref: str) -> bool:
        if not _valid_ref(ref):
            return False
        with self._lock:
            existed = self._meta_path(scope, ref).exists()
            self._meta_path(scope, ref).unlink(missing_ok=True)
            self._payload(scope, ref).unlink(missing_ok=True)
        return existed

    def list(self, scope: Scope, kind: str | None = None) -> list[ArtifactMeta]:
        now = self.clock()
        metas = []
        for meta in self._all(scope):
            if is_expired(meta, now):
                self._drop(scope, meta.ref, "expired")
            elif kind is None or meta.kind == kind:
                metas.append(meta)
        return sorted(metas, key=lambda m: (m.created_at, m.ref))

    def close(self) -> None:
        return None

    # -- optional streaming members ------------------------------------------------------------
    def put_stream(
        self, scope: Scope, chunks: Iterable[bytes], declared_bytes: int, options: PutOptions
    ) -> ArtifactMeta:
        directory = self._dir(scope)
        directory.mkdir(parents=True, exist_ok=True)
        hasher = hashlib.sha256() if options.digest else None
        written = 0
        fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=".incoming-")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                for chunk in chunks:
                    written += len(chunk)
                    if written > declared_bytes:
                        break
                    if hasher is not None:
                        hasher.update(chunk)
                    fh.write(chunk)
            if written != declared_bytes:
                raise ArtifactSizeMismatchError(
                    f"Streamed payload declared {declared_bytes:,} bytes but delivered "
                    f"{'more' if written > declared_bytes else f'{written:,}'}; nothing was stored."
                )
            now = self.clock()
            meta = ArtifactMeta(
                ref=mint_ref(), kind=options.kind, media_type=options.media_type,
                bytes=written, created_at=now,
                expires_at=expiry(now, options.ttl, self.retention),
                digest=None if hasher is None else "sha256:" + hasher.hexdigest(),
                label=options.label, parent_refs=tuple(options.parent_refs),
            )
            with self._lock:
                live = self.list(scope)
                for ref in plan_evictions(live, written, self.retention):
                    self._drop(scope, ref, "evicted")
                os.replace(tmp, self._payload(scope, meta.ref))
                _atomic_write(self._meta_path(scope, meta.ref), msgspec.json.encode(meta.to_json()))
        finally:
            tmp.unlink(missing_ok=True)
        self.emit("minted", ref=meta.ref, scope=str(scope), kind=meta.kind, bytes=meta.bytes)
        return meta

    def get_stream(self, scope: Scope, ref: str) -> StreamedArtifact | None:
        meta = self._live(scope, ref)
        if meta is None:
            return None
        try:
            fh = self._payload(scope, ref).open("rb")
        except FileNotFoundError:
            return None
        return StreamedArtifact(meta, _read_chunks(fh))

    # -- internals -----------------------------------------------------------------------------
    def _dir(self, scope: Scope) -> Path:
        name = scope.tenant.encode().hex() + "-" + scope.session.encode().hex()
        return self.root / "artifacts" / name

    def _payload(self, scope: Scope, ref: str) -> Path:
        return self._dir(scope) / f"{ref}.bin"

    def _meta_path(self, scope: Scope, ref: str) -> Path:
        return self._dir(scope) / f"{ref}.json"

    def _read_meta(self, path: Path) -> ArtifactMeta | None:
        try:
            return ArtifactMeta.from_json(msgspec.json.decode(path.read_bytes()))
        except FileNotFoundError:
            return None

    def _all(self, scope: Scope) -> Iterator[ArtifactMeta]:
        directory = self._dir(scope)
        if not directory.is_dir():
            return
        for path in directory.glob("art_*.json"):
            meta = self._read_meta(path)
            if meta is not None:
                yield meta

    def _live(self, scope: Scope, ref: str) -> ArtifactMeta | None:
        meta = self._read_meta(self._meta_path(scope, ref)) if _valid_ref(ref) else None
        if meta is not None and is_expired(meta, self.clock()):
            self._drop(scope, ref, "expired")
            meta = None
        if meta is None:
            self.emit("refused", ref=ref, scope=str(scope), reason="missing-or-expired")
        return meta

    def _drop(self, scope: Scope, ref: str, why: str) -> None:
        self._meta_path(scope, ref).unlink(missing_ok=True)
        self._payload(scope, ref).unlink(missing_ok=True)
        if why == "expired":
            self.emit("expired", ref=ref, scope=str(scope))
        else:
            self.emit("evicted", ref=ref, scope=str(scope), reason="retention")


def _valid_ref(ref: str) -> bool:
    # A ref becomes a file name: never let one carry a path separator or dots.
    return ref.startswith("art_") and ref[4:].isalnum() and ref.isascii()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".meta-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def _read_chunks(fh: object) -> Iterator[bytes]:
    import io

    assert isinstance(fh, io.BufferedReader)
    with fh:
        while chunk := fh.read(_CHUNK):
            yield chunk
