"""`Payload`: bytes a tool hands back (a file, a PDF, an export). Never shown to the model.

Dispatch streams every Payload in a result into the artifact store and shows the model an opaque
marker in its place, whatever the size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Payload:
    """Bytes a tool returns to be stored rather than shown: the model gets a ref to them."""
    open_chunks: Callable[[], Iterator[bytes]]
    size: int
    media_type: str = "application/octet-stream"
    kind: str | None = None
    label: str | None = None

    @staticmethod
    def from_bytes(data: bytes, media_type: str = "application/octet-stream", *,
                   kind: str | None = None, label: str | None = None) -> Payload:
        """A payload of `data` held in memory."""
        return Payload(lambda: iter([data]), len(data), media_type, kind, label)

    @staticmethod
    def from_path(path: str | Path, media_type: str = "application/octet-stream", *,
                  kind: str | None = None, label: str | None = None) -> Payload:
        """A payload read from the file at `path` when stored."""
        p = Path(path)
        return Payload(lambda: _read(p), p.stat().st_size, media_type, kind, label)

    @staticmethod
    def from_chunks(chunks: Callable[[], Iterable[bytes]], size: int,
                    media_type: str = "application/octet-stream", *, kind: str | None = None,
                    label: str | None = None) -> Payload:
        """A payload of `size` bytes streamed from `chunks()` when stored."""
        return Payload(lambda: iter(chunks()), size, media_type, kind, label)


def _read(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk
