"""What a search page reads of each tool it shows, analyzed once per tool and kept.

Owns `PageTexts` (an index's material per tool) and `PageText` (one tool's): its description as
one line (`excerpts.normalize`), its words split once (`Analyzer.words_of`: a search locates its
terms among them without a regex pass), and, made only when a row needs its label prefix, the
terms and snippet pieces of its other fields (name, tags, glossary, parameters). The law: a
row's hits and prefix are what analyzing its texts per search gives (the same spans in the same
order), so the page is the same; a tool is split on its first row (a page pays for its rows, not
the catalog's: one C-level pass a row, never a word-by-word analysis of a long description), and
at most `KEEP` tools' material is kept per index, the oldest dropped first.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from byref.discovery.lexical.text import Analyzer, Span, Words, split_words
from byref.discovery.page.excerpts import normalize

if TYPE_CHECKING:
    from byref.discovery.lexical.index import SearchIndex

LABELS = (("name", "Tool name"), ("capabilities", "Capabilities"), ("glossary", "Glossary"),
          ("parameters", "Parameters"))
"""The fields a row's label prefix may name, in the order it names them, with their labels."""
KEEP = 4_096
"""Tools whose page material an index keeps (a page shows 8; a session's searches repeat)."""


@dataclass(frozen=True, slots=True)
class Fields:
    """A tool's fields other than its description, as its row's label prefix reads them."""

    present: tuple[tuple[str, str, frozenset[str]], ...]
    """(field, label, its terms) per `LABELS` row."""
    name: str
    """The catalog name as plain words."""
    tags: tuple[tuple[str, frozenset[str]], ...]
    """(tag, its terms): capabilities, domains, entities, relationships."""
    parameters: tuple[tuple[str, frozenset[str]], ...]
    """(top-level parameter name, the terms of its name and description)."""
    glossary: str
    """The glossary, then each learned word once."""


@dataclass(slots=True)
class PageText:
    """One tool's description as a row shows it, and its words (`Analyzer.words_of`)."""

    text: str
    words: Words | None
    analyzer: Analyzer
    fields: Fields | None = None

    def hits(self, terms: Iterable[str]) -> list[Span]:
        """The spans of `terms` in text order (`Analyzer.spans(text, terms)`)."""
        return self.analyzer.hits(self.text, set(terms), self.words)


class PageTexts:
    """One index's `PageText` per tool, made on the tool's first row."""

    def __init__(self, index: SearchIndex, keep: int = KEEP) -> None:
        self._index = index
        self._keep = keep
        self._made: dict[int, PageText] = {}
        self._lock = threading.Lock()

    @property
    def analyzer(self) -> Analyzer:
        """The index's analyzer."""
        return self._index.analyzer

    def of(self, doc: int) -> PageText:
        """Tool `doc`'s page text."""
        found = self._made.get(doc)
        if found is not None:
            return found
        text = normalize(self._index.entries[doc].description)
        analyzer = self._index.analyzer
        made = PageText(text, analyzer.words_of(text), analyzer)
        with self._lock:
            found = self._made.setdefault(doc, made)
            while len(self._made) > self._keep:
                del self._made[next(iter(self._made))]
        return found

    def fields(self, doc: int) -> Fields:
        """Tool `doc`'s other fields (made on the first row that needs its label prefix)."""
        page = self.of(doc)
        if page.fields is None:
            page.fields = self._fields(doc)
        return page.fields

    def _fields(self, doc: int) -> Fields:
        index = self._index
        analyzer = index.analyzer
        entry = index.entries[doc]
        texts = index.field_texts(entry)
        present = tuple((f, label, frozenset(analyzer.terms_of_all(texts[f])))
                        for f, label in LABELS)
        tags = [*entry.capabilities, *entry.domains, *entry.entities, *entry.relationships]
        props = entry.tool.input_schema.get("properties") or {}
        parameters = tuple(
            (str(p), frozenset(analyzer.terms_of_all((str(p), _description_of(spec)))))
            for p, spec in (props.items() if isinstance(props, dict) else ()))
        learned = " ".join(dict.fromkeys(entry.learned.split()))  # once each, not ∝ support
        return Fields(present, split_words(entry.name),
                      tuple((t, frozenset(analyzer.terms(split_words(t)))) for t in tags),
                      parameters, " ".join([*entry.glossary, learned]))


_OF: weakref.WeakKeyDictionary[Any, PageTexts] = weakref.WeakKeyDictionary()
_OF_LOCK = threading.Lock()


def page_texts(index: SearchIndex) -> PageTexts:
    """`index`'s own page material (made on its first page, gone with it)."""
    found = _OF.get(index)
    if found is None:
        with _OF_LOCK:
            found = _OF.get(index)
            if found is None:
                found = _OF[index] = PageTexts(index)
    return found


def _description_of(spec: Any) -> str:
    if isinstance(spec, dict) and isinstance(spec.get("description"), str):
        return str(spec["description"])
    return ""
