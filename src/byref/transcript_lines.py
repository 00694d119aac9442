"""Where a transcript's encoded lines live: a list in memory, or an append-only file.

The transcript's record is its JSON lines; these classes only hold them, indexed by position.
The law: `append` is all or nothing — a line that cannot be written whole leaves the store
exactly as it was (a file is cut back to its last whole line) — and `line(i)` returns the
bytes appended i-th, never another's. A file keeps one 8-byte offset per line in memory
(`array('Q')`), not the lines; reads and writes are positional (`os.pread`, `os.pwrite`), so
no file position is shared. The anonymous file (`FileLines.anonymous`) has no name on
disk and is freed by the OS when it is closed or its process ends; "in memory" then means "not
durable", not "in RAM".
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from array import array
from pathlib import Path
from typing import BinaryIO, Protocol

from byref.errors import DeveloperError


class TranscriptClosedError(DeveloperError, ValueError):
    """The transcript was closed; its lines are gone (developer-facing)."""


_CLOSED = "This transcript is closed; its messages were released."


class Lines(Protocol):
    """Where a transcript keeps its encoded lines: in memory or in a file."""
    def __len__(self) -> int: ...
    def append(self, line: bytes) -> None:
        """Add one encoded line at the end."""

    def line(self, index: int) -> bytes:
        """The line at `index` (0 is the first kept)."""

    def close(self) -> None:
        """Release the storage; later reads raise `TranscriptClosedError`."""


class MemoryLines:
    """Encoded lines in a list: a few dozen bytes of overhead per message, no file."""

    def __init__(self) -> None:
        self._lines: list[bytes] | None = []

    def __len__(self) -> int:
        return len(self._lines) if self._lines is not None else 0

    def append(self, line: bytes) -> None:
        """Add one encoded line at the end."""
        self._open().append(line)

    def line(self, index: int) -> bytes:
        """The line at `index`."""
        return self._open()[index]

    def close(self) -> None:
        """Drop the lines."""
        self._lines = None

    def _open(self) -> list[bytes]:
        if self._lines is None:
            raise TranscriptClosedError(_CLOSED)
        return self._lines


class FileLines:
    """Lines in an append-only file, with the offset of each line kept in memory."""

    def __init__(self, reader: BinaryIO | None, *, path: Path | None = None,
                 fsync: bool = False) -> None:
        self._reader = reader
        """Read handle (None until a persisted file exists); also the writer when anonymous."""
        self._writer: BinaryIO | None = reader if path is None else None
        self._path = path
        self._fsync = fsync
        self._starts = array("Q")
        self._size = 0
        self._lock = threading.Lock()
        self._closed = False

    @classmethod
    def anonymous(cls, directory: str | Path | None = None) -> FileLines:
        """A nameless temporary file in `directory` (the system's temporary directory if None)."""
        fh = tempfile.TemporaryFile(dir=directory, buffering=0)  # noqa: SIM115 -- held open
        return cls(fh)

    @classmethod
    def persisted(cls, path: Path) -> FileLines:
        """The file at `path`, durable: every append is fsynced before it is acknowledged.

        Opened for reading now and for writing at the first append, so reading a transcript
        one may not write (or one that does not exist yet) creates and changes nothing.
        """
        reader = path.open("rb", buffering=0) if path.exists() else None
        return cls(reader, path=path, fsync=True)

    def adopt(self, length: int) -> None:
        """Index a whole line of `length` bytes already in the file (loading)."""
        self._starts.append(self._size)
        self._size += length

    def __len__(self) -> int:
        return len(self._starts)

    def append(self, line: bytes) -> None:
        """Write one encoded line at the end of the file (all of it, or nothing visible)."""
        with self._lock:
            writer = self._open_writer()
            start = self._size
            try:
                view, at = memoryview(line), 0
                while at < len(view):
                    at += os.pwrite(writer.fileno(), view[at:], start + at)
                if self._fsync:
                    os.fsync(writer.fileno())
            except BaseException:
                # A partial line must not stay on disk under the next one: cut back and re-raise.
                # The write error is the one to report; a reload drops a torn tail anyway.
                with contextlib.suppress(OSError):
                    os.ftruncate(writer.fileno(), start)
                raise
            self._starts.append(start)
            self._size = start + len(line)

    def line(self, index: int) -> bytes:
        """The line at `index`, read from the file; raises `TranscriptClosedError` once closed."""
        with self._lock:
            if self._closed or self._reader is None:
                raise TranscriptClosedError(_CLOSED)
            start = self._starts[index]
            end = self._starts[index + 1] if index + 1 < len(self._starts) else self._size
            # Under the lock: a concurrent close must not hand this fd number to another file.
            data = os.pread(self._reader.fileno(), end - start, start)
        if len(data) != end - start:
            raise OSError(f"Transcript file {str(self._path or '<spill>')!r} is shorter than "
                          f"its index (line {index + 1}); it was changed outside byref.")
        return data

    def truncate(self, size: int) -> None:
        """Cut a loaded persisted file back to `size` bytes (a torn last line)."""
        assert self._path is not None
        with self._path.open("r+b") as fh:
            fh.truncate(size)

    def close(self) -> None:
        """Close the file handles."""
        with self._lock:
            self._closed = True
            for fh in {id(f): f for f in (self._reader, self._writer) if f is not None}.values():
                fh.close()

    def _open_writer(self) -> BinaryIO:
        if self._closed:
            raise TranscriptClosedError("This transcript is closed; nothing more can be appended.")
        if self._writer is None:
            assert self._path is not None
            # Not O_APPEND: lines are written at the offset the index expects (pwrite).
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            self._writer = os.fdopen(fd, "r+b", buffering=0)
            if self._reader is None:
                self._reader = self._writer
        return self._writer
