"""JSON Pointer and JsonQuery filters, over in-memory values and over streamed bytes.

Streaming uses ijson's yajl2_c backend explicitly: selecting 148 rows out of a 2 GB export holds
one item at a time, never the document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import ijson
import jsonpointer

from byref.errors import Refused
from byref.refs import Clause

try:
    _ijson = ijson.get_backend("yajl2_c")
except ImportError as exc:  # pragma: no cover - depends on the platform's wheel
    raise ImportError(
        "byref needs ijson's yajl2_c backend to stream JSON; reinstall ijson from a binary wheel "
        "(pip install --force-reinstall --only-binary=:all: ijson)."
    ) from exc

BACKEND = _ijson.backend_name
OpenSource = Callable[[], IO[bytes]]


class StaleSelectionError(Refused, LookupError):
    """A derived path no longer selects what it did; never answered with an empty value."""


class NotJsonError(Refused, ValueError):
    """Bytes under a JSON recipe are not JSON."""


class ChunkReader:
    """A read()-able file over an iterator of byte chunks (what ijson consumes)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buffer = b""

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left when negative), pulling chunks as needed."""
        if size < 0:
            rest = self._buffer + b"".join(self._chunks)
            self._buffer = b""
            return rest
        while len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
        out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


# -- in memory ---------------------------------------------------------------------------------
def resolve_pointer(document: Any, path: str, *, where: str = "the source") -> Any:
    """The value at JSON Pointer `path` in `document`; raises `StaleSelectionError` when it does
    not exist."""
    try:
        return jsonpointer.resolve_pointer(document, path)
    except (jsonpointer.JsonPointerException, TypeError, KeyError, IndexError) as exc:
        raise StaleSelectionError(
            f"Derived JSON path {path!r} no longer exists in {where}."
        ) from exc


def query_value(
    document: Any, path: str, clauses: tuple[Clause, ...], *, where: str = "the source"
) -> list[Any]:
    """The items of the array at `path` matching every clause; raises `StaleSelectionError` when
    `path` is missing or not an array."""
    array = resolve_pointer(document, path, where=where)
    if not isinstance(array, list):
        raise StaleSelectionError(
            f"Derived JSON path {path!r} in {where} is a {_json_type(array)}, not an array."
        )
    return [item for item in array if matches(item, clauses)]


def matches(item: Any, clauses: tuple[Clause, ...]) -> bool:
    """All clauses hold (AND). `eq` is JSON equality (true is not 1); `contains` is substring."""
    for clause in clauses:
        found, value = _field(item, clause.field)
        if not found:
            return False
        if clause.has_eq:
            if not _json_equal(value, clause.eq):
                return False
        elif not (isinstance(value, str) and clause.contains is not None
                  and clause.contains in value):
            return False
    return True


# -- over streams ------------------------------------------------------------------------------
def stream_pointer(open_source: OpenSource, path: str, *, where: str = "the source") -> Any:
    """The node at `path`, reading the document as a stream; only that node is materialized."""
    head, index, rest = _split_at_index(path)
    try:
        if index is None:
            for node in _ijson.items(open_source(), _prefix(head), use_float=True):
                return node
        else:
            for i, node in enumerate(
                _ijson.items(open_source(), _prefix(head, item=True), use_float=True)
            ):
                if i == index:
                    return resolve_pointer(node, rest, where=where) if rest else node
    except ijson.JSONError as exc:
        raise NotJsonError(f"{where} is not valid JSON ({exc}); a JSON path cannot apply.") from exc
    raise StaleSelectionError(f"Derived JSON path {path!r} no longer exists in {where}.")


def query_stream(
    open_source: OpenSource, path: str, clauses: tuple[Clause, ...], *, where: str = "the source"
) -> Iterator[Any]:
    """Items of the array at `path` that match, streamed one at a time."""
    head, index, rest = _split_at_index(path)
    if index is not None:
        # An index inside the path: fetch that element, then filter it in memory.
        yield from query_value(stream_pointer(open_source, head + f"/{index}", where=where),
                               rest, clauses, where=where)
        return
    seen_any = False
    try:
        for item in _ijson.items(open_source(), _prefix(path, item=True), use_float=True):
            seen_any = True
            if matches(item, clauses):
                yield item
        if not seen_any:
            _check_empty_array(open_source, path, where)
    except ijson.JSONError as exc:
        raise NotJsonError(f"{where} is not valid JSON ({exc}); a JSON path cannot apply.") from exc


def _check_empty_array(open_source: OpenSource, path: str, where: str) -> None:
    # Zero items is either an empty array (fine) or a path that is gone (stale): look once more.
    target = _prefix(path)
    for prefix, event, _ in _ijson.parse(open_source()):
        if prefix == target and event in ("start_array", "start_map", "string", "number",
                                          "boolean", "null"):
            if event == "start_array":
                return
            kind = {"start_map": "an object"}.get(event, f"a {event}")
            raise StaleSelectionError(
                f"Derived JSON path {path!r} in {where} is {kind}, not an array."
            )
    raise StaleSelectionError(f"Derived JSON path {path!r} no longer exists in {where}.")


def _split_at_index(path: str) -> tuple[str, int | None, str]:
    """Split "/a/3/b" into ("/a", 3, "/b"): ijson prefixes cannot name one array element."""
    segments = path.split("/")[1:] if path else []
    for i, seg in enumerate(segments):
        if seg.isascii() and seg.isdigit():
            head = "".join("/" + s for s in segments[:i])
            rest = "".join("/" + s for s in segments[i + 1 :])
            return head, int(seg), rest
    return path, None, ""


def _prefix(path: str, *, item: bool = False) -> str:
    segments = path.split("/")[1:] if path else []
    parts = [seg.replace("~1", "/").replace("~0", "~") for seg in segments]
    if item:
        parts.append("item")
    return ".".join(parts)


def _field(item: Any, dotted: str) -> tuple[bool, Any]:
    current = item
    for seg in dotted.split("."):
        if isinstance(current, dict) and seg in current:
            current = current[seg]
        else:
            return False, None
    return True, current


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else type(value).__name__
