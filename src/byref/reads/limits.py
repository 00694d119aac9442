"""The three limits, separately configured, and the request room an explicit read must respect.

Owns the numbers that decide how much may be stored, inserted and read. The law: three questions,
three dials. Storage capacity (how much one kept result may hold) refuses an oversized result at
keep time; automatic insertion (how much enters context with no explicit selection; shared with
dispatch placement, 24 KiB by default) never bounds an explicit read; the explicit-read limit
(128 KiB by default) bounds one deliberate read and is itself bounded by the room left in the
request that will carry it. "Not inserted automatically" never means "cannot be read".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from byref.defaults import AUTO_INSERT_BYTES as AUTO_INSERT_BYTES
from byref.errors import InvalidValue

EXPLICIT_READ_BYTES: Final = 128 * 1024
EXPLICIT_READ_ENTRIES: Final = 1_000
STORAGE_BYTES: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """The bounds of reading results: the largest kept version, how much is inserted inline, and
    how much (bytes, entries) one explicit read returns."""
    storage_bytes: int = STORAGE_BYTES
    """Capacity of one kept result version; a larger result is refused, never cut."""
    auto_insert_bytes: int = AUTO_INSERT_BYTES
    """Automatic insertion (placement's threshold). Reads never apply it to themselves."""
    explicit_read_bytes: int = EXPLICIT_READ_BYTES
    """One explicit read's selection, in encoded bytes, before the request room bounds it."""
    explicit_read_entries: int = EXPLICIT_READ_ENTRIES
    """Records per explicit read; more are reported as `entry_limit`, never silently dropped."""

    def __post_init__(self) -> None:
        for name in ("storage_bytes", "auto_insert_bytes", "explicit_read_bytes",
                     "explicit_read_entries"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise InvalidValue(f"ReadLimits.{name} must be a positive integer, got {value!r}")


@runtime_checkable
class ReadRoom(Protocol):
    """How many bytes the request that will carry a read's answer can still take.

    Implemented by request assembly (`byref.context`); `None` means no budget is in force.
    `consume` lets two reads in one turn share the room instead of each claiming all of it.
    """

    def available(self) -> int | None:
        """Bytes the current request can still take, or None when unbounded."""

    def consume(self, n: int) -> None:
        """Count `n` bytes against the room."""


@dataclass(frozen=True, slots=True)
class ReadBudget:
    """The byte bound one read actually runs under, and which of the three bounds set it."""

    bytes: int
    limited_by: str
    """"max_bytes" (the caller's own), "explicit_read" (the dial) or "request_room"."""


def read_budget(
    limits: ReadLimits, max_bytes: int | None, room: int | None, overhead: int
) -> ReadBudget:
    """The smallest of the caller's max_bytes, the explicit-read limit and the request's room
    (less `overhead`, the bytes of the answer around the records)."""
    candidates = [(limits.explicit_read_bytes, "explicit_read")]
    if max_bytes is not None:
        candidates.append((max_bytes, "max_bytes"))
    if room is not None:
        candidates.append((max(0, room - overhead), "request_room"))
    value, why = min(candidates, key=lambda c: c[0])
    return ReadBudget(value, why)
