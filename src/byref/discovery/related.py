"""Related words: the synonym groups of synonyms.txt, applied to a query's terms and phrases.

The law: a query word's group mates (and the groups of the phrases it contains, such as "money
back") are searched too, at `SYNONYM_WEIGHT` of their BM25F score; they are not query terms (no
coverage, no weight, no excerpt hits). Groups are stemmed by the index's analyzer, like
everything else.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from byref.discovery.text import Analyzer

SYNONYM_WEIGHT = 0.5
"""A query word's related words (synonyms.txt) search at half their BM25F score. Chosen on rows
outside the sample: recall@5 0.648 / 0.683 / 0.699 / 0.701 / 0.701 / 0.685 at 0 / 0.2 / 0.35 /
0.5 / 0.7 / 1."""
SYNONYMS_FILE = Path(__file__).with_name("synonyms.txt")


def read_synonyms(path: Path = SYNONYMS_FILE) -> list[str]:
    """The groups of related words in `path` (one group a line; `#` starts a comment)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return [line for line in lines if line]


class Related:
    """Term → the other terms of its groups, and phrase → the terms of its groups."""

    def __init__(self, groups: Iterable[str], analyzer: Analyzer) -> None:
        """A member written with `_` ("money_back") is a phrase: kept in `phrases` (its words'
        stems, stop words included → the group's single terms), never searched for itself."""
        self.analyzer = analyzer
        out: dict[str, dict[str, None]] = {}
        phrases: dict[tuple[str, ...], dict[str, None]] = {}
        for group in groups:
            members = group.split()
            said = [m for m in members if "_" in m]
            terms = list(dict.fromkeys(
                t for m in members if "_" not in m for t in analyzer.terms(m)))
            for term in terms:
                out.setdefault(term, {}).update((t, None) for t in terms if t != term)
            for phrase in said:
                key = tuple(analyzer.plain_stems(phrase.replace("_", " ")))
                if len(key) > 1:
                    phrases.setdefault(key, {}).update(dict.fromkeys(terms))
        self.phrases = {key: tuple(terms) for key, terms in phrases.items() if terms}
        self.phrase_lengths = sorted({len(k) for k in self.phrases}, reverse=True)
        self.by_term = {term: tuple(others) for term, others in out.items() if others}

    def terms(self, query: str, terms: tuple[str, ...]) -> list[str]:
        """The related words `query` also searches: its terms' group mates and the groups of
        the phrases it contains, minus its own terms."""
        related = [r for t in terms for r in self.by_term.get(t, ())]
        if self.phrases:
            stems = self.analyzer.plain_stems(query)
            for size in self.phrase_lengths:
                for i in range(len(stems) - size + 1):
                    related.extend(self.phrases.get(tuple(stems[i:i + size]), ()))
        own = set(terms)
        return [r for r in dict.fromkeys(related) if r not in own]
