"""search_tools' filters: capability prefixes, domains, entities and relationships.

The law: the axes intersect, values within an axis unite, capabilities match by
prefix; a value no tool has is refused with the values that exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from byref.discovery.catalog.ontology import capability_matches
from byref.errors import Refused

if TYPE_CHECKING:
    from byref.discovery.catalog.catalog import Entry


class FilterError(Refused, ValueError):
    """A filter value matches no tool in the catalog; the text teaches what exists."""


@dataclass(frozen=True, slots=True)
class Filters:
    """search_tools' filters: any value within an axis, every given axis (capabilities match
    by prefix)."""

    capabilities: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    relationships: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        """True when any axis has a value."""
        return bool(self.capabilities or self.domains or self.entities or self.relationships)

    def to_json(self) -> dict[str, list[str]]:
        """The non-empty axes as lists."""
        return {k: list(v) for k, v in (
            ("capabilities", self.capabilities), ("domains", self.domains),
            ("entities", self.entities), ("relationships", self.relationships)) if v}




class TagTables:
    """Tag value → docs, per axis, over one index's entries."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.by_capability: dict[str, set[int]] = {}
        self.by_domain: dict[str, set[int]] = {}
        self.by_entity: dict[str, set[int]] = {}
        self.by_relationship: dict[str, set[int]] = {}
        for doc, entry in enumerate(entries):
            for axis, values in ((self.by_capability, entry.capabilities),
                                 (self.by_domain, entry.domains),
                                 (self.by_entity, entry.entities),
                                 (self.by_relationship, entry.relationships)):
                for value in values:
                    axis.setdefault(value, set()).add(doc)

    def candidates(self, filters: Filters | None) -> set[int] | None:
        """The docs passing every filter axis (None: no filter, every doc)."""
        if not filters:
            return None
        result: set[int] | None = None
        axes: list[tuple[str, tuple[str, ...], dict[str, set[int]], bool]] = [
            ("capability", filters.capabilities, self.by_capability, True),
            ("domain", filters.domains, self.by_domain, False),
            ("entity", filters.entities, self.by_entity, False),
            ("relationship", filters.relationships, self.by_relationship, False),
        ]
        for label, values, table, prefix in axes:
            if not values:
                continue
            docs: set[int] = set()
            for value in values:
                found = _matching(table, value, prefix)
                if not found:
                    raise FilterError(_no_such(label, value, table, prefix))
                docs |= found
            result = docs if result is None else result & docs
        return result


def _matching(table: dict[str, set[int]], value: str, prefix: bool) -> set[int]:
    if not prefix:
        return table.get(value, set())
    found: set[int] = set()
    for key, docs in table.items():
        if capability_matches(key, value):
            found |= docs
    return found


def _no_such(label: str, value: str, table: dict[str, set[int]], prefix: bool) -> str:
    import difflib

    known = sorted({k.split(":", 1)[0] for k in table} if prefix else set(table))
    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    if not known:
        return f"No tool has a {label} {value!r}{hint}; no tool in the catalog has any {label}."
    listed = ", ".join(known[:40]) + (f", … ({len(known)} in all)" if len(known) > 40 else "")
    return f"No tool has the {label} {value!r}{hint}. Known {label} values: {listed}."
