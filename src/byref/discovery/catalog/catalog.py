"""The catalog: every tool the agent could call, with its tags, server and search document.

The law: a catalog name is unique and is the name the model declares and calls; the tags a
tool is searched and filtered by are its own (capabilities, domains, entities, relationships)
plus what they imply (a relationship tags both endpoint entities; the ontology adds glossary
text). Adding a tool bumps `version`, so an index built from an older catalog is rebuilt rather
than silently answering for a catalog that no longer exists.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from byref.discovery.catalog.ontology import Ontology, capability_root, relationship_endpoints
from byref.errors import InvalidValue, UnknownName
from byref.tools import Tool

if TYPE_CHECKING:
    from byref.discovery.lexical.index import SearchIndex


@dataclass(frozen=True)
class Entry:
    """One catalog tool and everything search needs to know about it."""

    tool: Tool
    server: str | None
    original_name: str
    """The name the tool's server lists it under (the catalog name may be qualified)."""
    relationships: tuple[str, ...]
    entities: tuple[str, ...]
    """The tool's own entities plus every relationship endpoint, deduplicated."""
    glossary: tuple[str, ...]
    """The tool's own glossary plus the ontology's text for each concept it is tagged with."""
    learned: str = ""
    """Glossary words learned from use (`Catalog.learn`); searched with the glossary."""

    @property
    def name(self) -> str:
        """The catalog name (unique in the catalog)."""
        return self.tool.name

    @property
    def description(self) -> str:
        """The tool's current description."""
        return self.tool.description

    @property
    def capabilities(self) -> tuple[str, ...]:
        """The tool's capability tags."""
        return self.tool.capabilities

    @property
    def domains(self) -> tuple[str, ...]:
        """The tool's domain tags."""
        return self.tool.domains

    def glossary_text(self) -> list[str]:
        """The glossary field: curated text, then the learned words."""
        return [*self.glossary, self.learned] if self.learned else list(self.glossary)

    def parameter_text(self) -> list[str]:
        """Top-level parameter names and descriptions (their own search field)."""
        props = self.tool.input_schema.get("properties") or {}
        out: list[str] = []
        if not isinstance(props, dict):
            return out
        for pname, prop in props.items():
            out.append(str(pname))
            if isinstance(prop, dict):
                desc = prop.get("description")
                if isinstance(desc, str):
                    out.append(desc)
        return out


class Catalog:
    """Tools by unique name; iteration is in insertion order."""

    def __init__(self, tools: Iterable[Tool] = (), *, ontology: Ontology | None = None) -> None:
        self.ontology = ontology or Ontology()
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._building = threading.Lock()
        self.version = 0
        self._index: SearchIndex | None = None
        for t in tools:
            self.add(t)

    def add(
        self,
        tool: Tool,
        *,
        server: str | None = None,
        original_name: str | None = None,
        relationships: Iterable[str] = (),
    ) -> Entry:
        """Add `tool`, its glossary widened by the ontology; a duplicate name raises ValueError.
        `original_name` is the server's name for it (default: the catalog name)."""
        rels = tuple(dict.fromkeys(relationships))
        endpoints = [e for r in rels for e in relationship_endpoints(r)]
        entities = tuple(dict.fromkeys((*tool.entities, *endpoints)))
        glossary = tuple(dict.fromkeys((*tool.glossary, *self.ontology.glossary(
            capabilities=tool.capabilities, domains=tool.domains, entities=entities,
            relationships=rels,
        ))))
        entry = Entry(tool, server, original_name or tool.name, rels, entities, glossary)
        with self._lock:
            if tool.name in self._entries:
                raise InvalidValue(
                    f"The catalog already has a tool named {tool.name!r}"
                    + (f" (from server {self._entries[tool.name].server!r})"
                       if self._entries[tool.name].server else "")
                    + "; catalog names must be unique."
                )
            self._entries[tool.name] = entry
            self.version += 1
        # A tool whose description is live data (run_python's package inventory) re-indexes
        # the catalog when it changes (descriptions as live data).
        tool.watchers.append(lambda changed: self.touch(changed.name))
        return entry

    def learn(self, glossary: Mapping[str, str]) -> list[str]:
        """Sets each named tool's learned glossary (`usage.learn_glossary`), replacing what it
        learned before; a name may be the catalog name or the server's name for the tool, in
        any case. Returns the names that match no tool (usage can outlive a tool)."""
        with self._lock:
            lookup: dict[str, str] = {}
            for name, entry in self._entries.items():
                for key in (entry.original_name.lower(), name.lower()):
                    lookup.setdefault(key, name)
                lookup[entry.original_name] = lookup[name] = name
            unknown = []
            for name, text in glossary.items():
                found = lookup.get(name) or lookup.get(name.lower())
                if found is None:
                    unknown.append(name)
                    continue
                self._entries[found] = replace(self._entries[found], learned=text)
            self.version += 1
        return unknown

    def touch(self, name: str) -> None:
        """A tool's text changed: the next search rebuilds the index."""
        with self._lock:
            if name in self._entries:
                self.version += 1

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries.values()))

    def entry(self, name: str) -> Entry:
        """The entry named `name`; KeyError says which names are close."""
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(self.unknown_text([name])) from None

    def tool(self, name: str) -> Tool:
        """The tool named `name` (KeyError as `entry`)."""
        return self.entry(name).tool

    @property
    def names(self) -> list[str]:
        """Catalog names in the order they were added."""
        return list(self._entries)

    def tools(self) -> list[Tool]:
        """The tools in the order they were added."""
        return [e.tool for e in self._entries.values()]

    def capability_roots(self) -> list[str]:
        """The deduplicated capability roots, sorted (the whole catalog in one line)."""
        return sorted({capability_root(c) for e in self._entries.values() for c in e.capabilities})

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """Close catalog names for a misspelt one (case-insensitive)."""
        lowered = {k.lower(): k for k in self._entries}
        close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.6)
        return [lowered[c] for c in close]

    def unknown_text(self, names: Iterable[str]) -> str:
        """"There is no tool 'x' (did you mean 'y'?)." for each unknown name."""
        pieces = []
        for name in names:
            close = self.suggest(name)
            hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            pieces.append(f"There is no tool {name!r} in the catalog{hint}.")
        return " ".join(pieces)

    def index(self, **options: Any) -> SearchIndex:
        """The search index for the catalog as it is now (rebuilt after any `add`); one build
        at a time, so a search arriving while `prepare` builds waits for that build."""
        from byref.discovery.lexical.index import SearchIndex

        if options:
            return SearchIndex(self, **options)
        with self._lock:
            current = self._index
            if current is not None and current.version == self.version:
                return current
        with self._building:
            with self._lock:
                current = self._index
                if current is not None and current.version == self.version:
                    return current
            built = SearchIndex(self)
            with self._lock:
                self._index = built
        return built

    def built(self) -> SearchIndex | None:
        """The index for the catalog as it is now, if made (None: the next search makes it)."""
        with self._lock:
            current = self._index
            return current if current is not None and current.version == self.version else None

    def prepare(self) -> threading.Thread:
        """Builds the index on a daemon thread, so the first search finds it made (a gateway
        calls this when its catalog changes; a search meanwhile waits for this build)."""
        thread = threading.Thread(target=self.index, name="byref-index", daemon=True)
        thread.start()
        return thread
