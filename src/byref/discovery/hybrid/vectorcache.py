"""On-disk cache of document vectors for hybrid search, so a restart re-encodes only new text.

The law: a vector is found only under the exact key it was made with — the encoder's
`model_id` (its file's sha256 and tokenisation settings) and the sha256 of the exact document
text — so a stale vector is never served. One file per model, replaced whole by a temp file and
`os.replace`: a reader sees the old file or the new one, never half of one. Writers merge under
an advisory lock (bounded wait; without it entries may be lost, never corrupted). A damaged or
truncated file is reported by a `VectorCacheWarning` and treated as empty, then rewritten.

Format (`<model_id>.vec`): header `BYREFVEC`, version u32, dtype code u8 (4 = float32,
8 = float64), dim u32, count u64; then count 32-byte text digests, count × dim vectors
(little-endian), and a sha256 of everything before it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from byref.errors import InvalidValue

CACHE_ENV = "BYREF_VECTOR_CACHE"
"""Directory of the vector cache, or `off` to disable it."""
OFF = "off"
MAX_ENTRIES = 20_000
"""Vectors kept per model (≈30 MB at 384 float32 dims); the least recently stored go first."""
LOCK_WAIT_S = 10.0
"""Longest wait for another writer's lock before writing without it (still atomic)."""

_MAGIC = b"BYREFVEC"
_VERSION = 1
_HEADER = struct.Struct("<8sIBIQ")
_DIGEST = 32
_DTYPES = {4: "<f4", 8: "<f8"}


class VectorCacheWarning(UserWarning):
    """The vector cache could not be read or written; search goes on, re-encoding instead."""


def default_dir() -> Path:
    """`$XDG_CACHE_HOME/byref/vectors`, else `~/.cache/byref/vectors`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "byref" / "vectors"


def cache_dir(setting: str | Path | None = None) -> Path | None:
    """The directory to use: `setting`, else $BYREF_VECTOR_CACHE, else `default_dir()`;
    None when either says `off`."""
    chosen = setting if setting is not None else os.environ.get(CACHE_ENV) or None
    if chosen is None:
        return default_dir()
    if str(chosen).strip().lower() == OFF:
        return None
    return Path(chosen).expanduser()


def text_digest(text: str) -> bytes:
    """The key of one document text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class VectorCache:
    """The vectors one model made, keyed by text digest, in `<directory>/<model_id>.vec`."""

    def __init__(self, directory: str | Path, model_id: str, *,
                 max_entries: int = MAX_ENTRIES) -> None:
        if not model_id or not all(c in "0123456789abcdef" for c in model_id):
            raise InvalidValue(f"model_id {model_id!r} must be a lower-case hex digest.")
        self.directory = Path(directory)
        self.model_id = model_id
        self.max_entries = max_entries
        self.path = self.directory / f"{model_id}.vec"

    def load(self) -> dict[bytes, Any]:
        """Every stored vector by text digest; empty (with a warning) if the file is damaged."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            warnings.warn(VectorCacheWarning(f"Vector cache {str(self.path)!r} unreadable "
                                             f"({exc}); re-encoding."), stacklevel=2)
            return {}
        try:
            return _decode(data)
        except ValueError as exc:
            warnings.warn(VectorCacheWarning(f"Vector cache {str(self.path)!r} is damaged "
                                             f"({exc}); ignoring it and rebuilding."),
                          stacklevel=2)
            return {}

    def lookup(self, texts: Iterable[str]) -> dict[str, Any]:
        """The stored vector of each text that has one."""
        stored = self.load()
        found = {}
        for text in texts:
            vector = stored.get(text_digest(text))
            if vector is not None:
                found[text] = vector
        return found

    def store(self, vectors: Mapping[str, Any], used: Iterable[str] = ()) -> None:
        """Add `vectors` (text → vector) to the file, merged with what another writer stored;
        `used` texts count as recently stored when old entries must make room. Never raises
        for an unwritable directory (warns instead)."""
        if not vectors:
            return
        import numpy as np

        new = {text_digest(t): np.asarray(v) for t, v in vectors.items()}
        recent = [d for d in (text_digest(t) for t in used) if d not in new]
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._locked():
                merged = self.load()
                dims = {v.shape for v in new.values()}
                if merged and {next(iter(merged.values())).shape} != dims:
                    merged = {}  # another dimension under the same model id: start afresh
                kept = {d: v for d, v in merged.items() if d not in new}
                again = set(recent)
                order = [d for d in kept if d not in again]
                order += [d for d in recent if d in kept]
                entries = {**{d: kept[d] for d in order}, **new}
                if len(entries) > self.max_entries:
                    entries = dict(list(entries.items())[-self.max_entries:])
                self._write(_encode(entries))
        except OSError as exc:
            warnings.warn(VectorCacheWarning(f"Vector cache {str(self.path)!r} not written "
                                             f"({exc}); vectors stay in memory."), stacklevel=2)

    def _write(self, blob: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{self.model_id[:16]}.",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # no advisory locks here: the rename alone keeps the file whole
            yield
            return
        with open(self.directory / f"{self.model_id}.lock", "a+b") as lock:
            deadline = time.monotonic() + LOCK_WAIT_S
            held = False
            while not held:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break  # a stuck writer: write anyway; the rename keeps the file whole
                    time.sleep(0.01)
            try:
                yield
            finally:
                if held:
                    fcntl.flock(lock, fcntl.LOCK_UN)


def _encode(entries: Mapping[bytes, Any]) -> bytes:
    import numpy as np

    first = next(iter(entries.values()))
    code = 8 if first.dtype == np.float64 else 4
    dim = int(first.shape[0])
    matrix = np.stack(list(entries.values())).astype(_DTYPES[code], copy=False)
    body = (_HEADER.pack(_MAGIC, _VERSION, code, dim, len(entries))
            + b"".join(entries.keys()) + matrix.tobytes())
    return body + hashlib.sha256(body).digest()


def _decode(data: bytes) -> dict[bytes, Any]:
    import numpy as np

    if len(data) < _HEADER.size + _DIGEST:
        raise ValueError(f"{len(data)} bytes is shorter than a header")
    body, check = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != check:
        raise ValueError("checksum mismatch (truncated or overwritten)")
    magic, version, code, dim, count = _HEADER.unpack_from(body)
    if magic != _MAGIC or version != _VERSION or code not in _DTYPES:
        raise ValueError(f"not a version-{_VERSION} vector file")
    width = count * _DIGEST
    size = count * dim * code
    if len(body) != _HEADER.size + width + size:
        raise ValueError("length does not match the header")
    digests = body[_HEADER.size:_HEADER.size + width]
    matrix = np.frombuffer(body, dtype=_DTYPES[code], count=count * dim,
                           offset=_HEADER.size + width).reshape(count, dim)
    native = matrix.astype(matrix.dtype.newbyteorder("="), copy=True)
    return {digests[i * _DIGEST:(i + 1) * _DIGEST]: native[i] for i in range(count)}
