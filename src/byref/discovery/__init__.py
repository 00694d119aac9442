"""Tool discovery: find, don't load.

Owns the catalog and its ontology, the search index (filters, field-boosted BM25, the rarity
re-rank), the excerpt lens, the scaffolding tools `search_tools` / `activate_tool`, the working
set as a projection of the transcript, and the glossary learned from use (search → activate).
The law: undiscovered tools cost one shared line; a search declares nothing; the declared set is
re-derived from the transcript every turn, name-sorted and byte-identical while it is unchanged,
with the one varying line last.

Typical use (the harness calls `declare` once per request)::

    catalog = load_catalog("servers/")            # or Catalog([...tools...], ontology=...)
    discovery = Discovery(catalog, budget=8)
    scaffolding = [*discovery.tools, *my_always_declared_tools]
    declared = discovery.declare(scaffolding, transcript)
    # request.tools = declared.declarations; system += "\n\n".join(declared.system_lines)
    discovery.learn(past_transcripts)             # words people searched with → glossary
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from byref.discovery.catalog.catalog import Catalog, Entry
from byref.discovery.catalog.mcp import ListingError, load_catalog
from byref.discovery.catalog.ontology import Ontology, OntologyError
from byref.discovery.declaring.declare import Declared, declare
from byref.discovery.declaring.scaffold import discovery_tools
from byref.discovery.declaring.usage import (
    MAX_TERMS,
    MIN_SUPPORT,
    SearchUsage,
    learn_glossary,
    usage_from_transcript,
)
from byref.discovery.declaring.workingset import DEFAULT_BUDGET, working_set
from byref.discovery.lexical.index import BOOSTS, FilterError, Filters, Ranking, SearchIndex
from byref.discovery.lexical.text import ANALYZER, Analyzer
from byref.discovery.page.excerpts import EXCERPT_MAX, PAGE_CHARS, excerpt, water_fill
from byref.discovery.page.search import DEFAULT_LIMIT, Page, Ranker, Result, Searcher
from byref.events import Emitter
from byref.tools import Tool
from byref.transcript import Transcript


class Discovery:
    """A catalog, its searcher and its two scaffolding tools, with one working-set budget."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        budget: int = DEFAULT_BUDGET,
        emit: Emitter | None = None,
        ranker: Ranker | None = None,
        page_chars: int = PAGE_CHARS,
        note: str = "",
        row_extras: Callable[[str], Mapping[str, Any]] | None = None,
    ) -> None:
        self.catalog = catalog
        self.budget = budget
        self.searcher = Searcher(catalog, ranker=ranker, page_chars=page_chars)
        self._made = functools.partial(discovery_tools, self.searcher, emit=emit, budget=budget,
                                       note=note, row_extras=row_extras)
        self.tools: tuple[Tool, Tool] = self._made()

    def declaring_tools(self, answer: Callable[[Sequence[str]], str]) -> tuple[Tool, Tool]:
        """The scaffolding for a client whose declared tools never change: activate_tool
        answers with the declarations, and `answer(names)` says how to run them (see
        `discovery_tools`); the same searcher as `tools`."""
        return self._made(answer_declarations=answer)

    def declare(
        self, scaffolding: Sequence[Tool], transcript: Transcript, *, refs: bool = True
    ) -> Declared:
        """This request's declarations and system lines (the module `declare` with this budget)."""
        return declare(self.catalog, scaffolding, transcript, budget=self.budget, refs=refs)

    def learn(
        self,
        transcripts: Iterable[Transcript],
        *,
        min_support: int = MIN_SUPPORT,
        max_terms: int = MAX_TERMS,
    ) -> list[SearchUsage]:
        """Teaches the catalog the words of every search that ended in an activation in
        `transcripts` (`usage.learn_glossary`; replaces what it learned before). Returns the
        evidence used, so the caller can keep it and learn again from a larger log."""
        evidence = [u for t in transcripts for u in usage_from_transcript(t)]
        self.catalog.learn(learn_glossary(evidence, min_support=min_support,
                                          max_terms=max_terms))
        return evidence


__all__ = [
    "ANALYZER", "BOOSTS", "DEFAULT_BUDGET", "DEFAULT_LIMIT", "EXCERPT_MAX", "PAGE_CHARS",
    "Analyzer", "Catalog", "Declared", "Discovery", "Entry", "FilterError", "Filters",
    "ListingError", "Ontology", "OntologyError", "Page", "Ranker", "Ranking", "Result",
    "SearchIndex", "SearchUsage", "Searcher", "declare", "discovery_tools", "excerpt",
    "load_catalog", "water_fill", "working_set",
]
