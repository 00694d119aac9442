"""Where a result's records are and what they look like, and how stored bytes become items.

Owns the step from a kept value (or its stored bytes) to the `Item` sequence coverage counts. The
law: the records of a value are found by one rule everywhere (the value itself when it is an
array, else its largest array member, else the value as one record), so a catalog entry's row
count and a read's `total` always agree; JSON Lines are split per line and a line that does not
parse stays an `Item` with its error at its position, so a skipped record is counted, not lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from byref.jsonview import decode
from byref.reads.coverage import Item

_FIELD_SAMPLE: Final = 200


@dataclass(frozen=True, slots=True)
class Shape:
    """Where the records of a JSON value are, how many there are, and their field names."""
    path: str
    """JSON Pointer of the records ('' when the value itself is the array)."""
    rows: int | None
    """Record count, None for text."""
    fields: tuple[str, ...]


def records_of(value: Any) -> tuple[str, list[Any] | None]:
    """(pointer, records) for a value; records is None when the value is text."""
    if isinstance(value, list):
        return "", value
    if isinstance(value, dict):
        arrays = [(k, v) for k, v in value.items() if isinstance(v, list)]
        if arrays:
            name, rows = max(arrays, key=lambda kv: len(kv[1]))
            return "/" + name.replace("~", "~0").replace("/", "~1"), rows
        return "", [value]
    if isinstance(value, str):
        return "", None
    return "", [value]


def describe(value: Any) -> Shape:
    """The shape of `value`: its records' pointer and count, and field names sampled from the
    first rows."""
    path, rows = records_of(value)
    if rows is None:
        return Shape(path, None, ())
    seen: dict[str, None] = {}
    for row in rows[:_FIELD_SAMPLE]:
        if isinstance(row, dict):
            seen.update(dict.fromkeys(str(k) for k in row))
    return Shape(path, len(rows), tuple(seen))


def json_lines_items(data: bytes) -> list[Item]:
    """One `Item` per non-empty line; a line that is not JSON keeps its position and error."""
    items: list[Item] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(Item(decode(line)))
        except Exception as exc:
            items.append(Item(error=f"line {number}: {exc}"))
    return items
