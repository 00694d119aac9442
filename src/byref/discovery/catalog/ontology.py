"""The ontology: concept ids (capabilities, domains, entities, relationships) and their glossary.

The law: a concept's glossary text is embedded into the search document of every tool tagged
with it, so the ontology is the curated synonym layer ("colored tag" finds a label tool whose
own name and description never say so). A relationship id is `subject.verb.object` and tags both
endpoint entities: a tool tagged `work-item.assigned-to.member` is found from `member` too.
Capabilities are `root:verb` strings; the deduplicated roots stand in for the whole catalog.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from byref.errors import DeveloperError

_ID = re.compile(r"[a-z0-9][a-z0-9_-]*\Z")


class OntologyError(DeveloperError, ValueError):
    """An ontology or a tag does not have the shape byref needs (the text says which)."""


def relationship_endpoints(relationship: str) -> tuple[str, str]:
    """`work-item.assigned-to.member` → ("work-item", "member")."""
    parts = relationship.split(".")
    if len(parts) != 3 or not all(_ID.match(p) for p in parts):
        raise OntologyError(
            f"Relationship {relationship!r} must be 'subject.verb.object' with lower-case ids "
            "(e.g. 'work-item.assigned-to.member')."
        )
    return parts[0], parts[2]


def capability_root(capability: str) -> str:
    """`work-item:create` → "work-item"; a capability without a verb is its own root."""
    return capability.split(":", 1)[0]


def capability_matches(capability: str, prefix: str) -> bool:
    """Prefix match on whole segments: "file" covers "file:read", not "filesystem:read"."""
    prefix = prefix.rstrip(":")
    return capability == prefix or capability.startswith(prefix + ":")


@dataclass(frozen=True)
class Ontology:
    """Glossary text per concept id, one mapping per axis. Empty by default."""

    capabilities: Mapping[str, str] = field(default_factory=dict)
    domains: Mapping[str, str] = field(default_factory=dict)
    entities: Mapping[str, str] = field(default_factory=dict)
    relationships: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for relationship in self.relationships:
            relationship_endpoints(relationship)

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Ontology:
        """`{"capabilities": {id: glossary}, "domains": {…}, "entities": {…}, "relationships":
        {…}}`; every key is optional."""
        axes = ("capabilities", "domains", "entities", "relationships")
        unknown = sorted(set(raw) - set(axes))
        if unknown:
            raise OntologyError(
                f"Unknown ontology section(s) {', '.join(map(repr, unknown))}; sections are "
                f"{', '.join(map(repr, axes))}."
            )
        out: dict[str, dict[str, str]] = {}
        for axis in axes:
            section = raw.get(axis) or {}
            if not isinstance(section, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in section.items()
            ):
                raise OntologyError(f"Ontology section {axis!r} must map ids to glossary text.")
            out[axis] = dict(section)
        return Ontology(**out)

    def glossary(
        self,
        *,
        capabilities: Iterable[str] = (),
        domains: Iterable[str] = (),
        entities: Iterable[str] = (),
        relationships: Iterable[str] = (),
    ) -> list[str]:
        """Glossary texts of the concepts a tool is tagged with (a capability's root counts)."""
        texts: list[str] = []
        seen: set[str] = set()

        def add(text: str | None) -> None:
            if text and text not in seen:
                seen.add(text)
                texts.append(text)

        for capability in capabilities:
            add(self.capabilities.get(capability))
            add(self.capabilities.get(capability_root(capability)))
        for domain in domains:
            add(self.domains.get(domain))
        for entity in entities:
            add(self.entities.get(entity))
        for relationship in relationships:
            add(self.relationships.get(relationship))
        return texts
