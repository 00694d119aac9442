"""Related words: the synonym groups of synonyms.txt and the sentence model's near words
(near_words.txt), applied to a query's terms and phrases.

The law: a query word's group mates (and the groups of the phrases it contains, such as "money
back") are searched too, at `SYNONYM_WEIGHT` of their BM25F score, and its nearest indexed near
words at `NEAR_WEIGHT`; neither are query terms (no coverage, no weight, no excerpt hits). Both
tables are stemmed by the index's analyzer, like everything else; both are general English
(the near words come from the model's own vocabulary, never from benchmark text).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Mapping
from pathlib import Path

from byref.discovery.lexical.text import ANALYZER, Analyzer

SYNONYM_WEIGHT = 0.5
"""A query word's related words (synonyms.txt) search at this share of their BM25F score. How it
was chosen: docs/NOTES.md#synonym-weight."""
SYNONYMS_FILE = Path(__file__).with_name("synonyms.txt")
SYNONYM_STEMS_FILE = Path(__file__).with_name("synonym_stems.txt")
"""synonyms.txt as the default analyzer stems it (`write_synonym_stems`; a test keeps it equal
to `Related` of synonyms.txt): a line a term and its group mates, or a phrase (its stems joined
by `_`) and its groups' terms. A first search reads it instead of stemming every group."""
NEAR_WEIGHT = 0.3
"""A query word's near words (near_words.txt: the sentence model's nearest words, made offline by
scripts/near_words.py) search at this share of their BM25F score, below synonyms, since the
model's neighbours are looser ("bill" → "charge"; "file" → "lodge"). The hybrid leaves them out.
How it was chosen: docs/NOTES.md#near-weight."""
NEAR_KEEP = 2
"""Near words a query word adds at most: the nearest ones that the catalog's documents have."""
NEAR_FILE = Path(__file__).with_name("near_words.txt")
NEAR_STEMS_FILE = Path(__file__).with_name("near_stems.txt")
"""near_words.txt already stemmed by the default analyzer (`write_near_stems`; a test keeps
it equal to `near_table` of near_words.txt): loading it is a split per line, not 100,000
stems, so the first search after a start does not pay for stemming the table (≈1 s on a
loaded machine, 0.1–0.2 s on an idle one)."""


def read_synonyms(path: Path = SYNONYMS_FILE) -> list[str]:
    """The groups of related words in `path` (one group a line; `#` starts a comment)."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text("utf-8").splitlines())
    return [line for line in lines if line]


def read_near_words(path: Path = NEAR_FILE) -> list[str]:
    """The lines of `path`: a word, then its near words (`#` lines are comments)."""
    return [line for line in path.read_text("utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def near_table(lines: Iterable[str], analyzer: Analyzer) -> dict[str, tuple[str, ...]]:
    """Stem → the stems of its near words (its own stem and stop words left out)."""
    out: dict[str, dict[str, None]] = {}
    for line in lines:
        word, *near = line.split()
        stem = analyzer.stem(word)
        if stem:
            mine = out.setdefault(stem, {})
            mine.update((n, None) for n in map(analyzer.stem, near) if n and n != stem)
    return {stem: tuple(near) for stem, near in out.items() if near}


_NEAR: dict[int, Mapping[str, tuple[str, ...]]] = {}
"""The packaged table per analyzer (read once a process: 11,661 lines)."""
_RELATED: dict[int, Related] = {}
"""The packaged synonyms and near words per analyzer (made once a process)."""


def forget_packaged() -> None:
    """Drops the packaged tables read so far, as a new process has none (the first-search
    bench)."""
    _NEAR.clear()
    _RELATED.clear()


def packaged_related(analyzer: Analyzer) -> Related:
    """synonyms.txt and near_words.txt as `Related` reads them, made once per analyzer (an index
    rebuilt after a catalog change reuses it); for the default analyzer from the pre-stemmed
    copies, so nothing is stemmed."""
    found = _RELATED.get(id(analyzer))
    if found is None:
        near = packaged_near(analyzer)
        found = (Related.from_stems(read_synonym_stems(), analyzer, near) if analyzer is ANALYZER
                 else Related(read_synonyms(), analyzer, near))
        _RELATED[id(analyzer)] = found
    return found


def packaged_near(analyzer: Analyzer) -> Mapping[str, tuple[str, ...]]:
    """near_words.txt as `near_table` reads it, cached per analyzer."""
    table = _NEAR.get(id(analyzer))
    if table is None:
        table = _NEAR[id(analyzer)] = (NearStems() if analyzer is ANALYZER
                                       else near_table(read_near_words(), analyzer))
    return table


class NearStems(Mapping[str, tuple[str, ...]]):
    """`NEAR_STEMS_FILE` read whole but parsed per looked-up stem (a search asks for a few):
    the first search after a start pays one file read, not 11,661 line splits."""

    def __init__(self, path: Path = NEAR_STEMS_FILE) -> None:
        self._text = "\n" + path.read_text("utf-8")
        self._parsed: dict[str, tuple[str, ...] | None] = {}
        """Stem → its near stems, or None for a stem the table lacks (found absent once: a
        miss scans the whole text)."""

    def __getitem__(self, stem: str) -> tuple[str, ...]:
        found = self._parsed.get(stem, ())
        if found:
            return found
        if found is None:
            raise KeyError(stem)
        at = self._text.find(f"\n{stem} ") if stem and " " not in stem else -1
        if at < 0:
            self._parsed[stem] = None
            raise KeyError(stem)
        start = at + len(stem) + 2
        end = self._text.find("\n", start)
        found = self._parsed[stem] = tuple(self._text[start:end if end >= 0 else None].split())
        return found

    def __iter__(self) -> Iterator[str]:
        return (line.partition(" ")[0] for line in self._text.splitlines() if line)

    def __len__(self) -> int:
        return self._text.count("\n") - self._text.endswith("\n")


def read_near_stems(path: Path = NEAR_STEMS_FILE) -> dict[str, tuple[str, ...]]:
    """The pre-stemmed table (`NEAR_STEMS_FILE`): a stem, then its near stems, a line each."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        stem, _, near = line.partition(" ")
        out[stem] = tuple(near.split())
    return out


def write_near_stems(path: Path = NEAR_STEMS_FILE) -> None:
    """Writes `NEAR_STEMS_FILE` from near_words.txt (run after scripts/near_words.py)."""
    table = near_table(read_near_words(), ANALYZER)
    path.write_text("".join(f"{stem} {' '.join(near)}\n" for stem, near in table.items()),
                    "utf-8")


Tables = tuple[dict[str, tuple[str, ...]], dict[tuple[str, ...], tuple[str, ...]]]
"""(term → its group mates, phrase stems → their groups' terms)."""


def read_synonym_stems(path: Path = SYNONYM_STEMS_FILE) -> Tables:
    """(term → its mates, phrase stems → their terms) from `SYNONYM_STEMS_FILE`."""
    by_term: dict[str, tuple[str, ...]] = {}
    phrases: dict[tuple[str, ...], tuple[str, ...]] = {}
    for line in path.read_text("utf-8").splitlines():
        key, *rest = line.split()
        if "_" in key:
            phrases[tuple(key.split("_"))] = tuple(rest)
        else:
            by_term[key] = tuple(rest)
    return by_term, phrases


def write_synonym_stems(path: Path = SYNONYM_STEMS_FILE) -> None:
    """Writes `SYNONYM_STEMS_FILE` from synonyms.txt (run after editing it)."""
    related = Related(read_synonyms(), ANALYZER)
    lines = [f"{term} {' '.join(mates)}\n" for term, mates in related.by_term.items()]
    lines += [f"{'_'.join(key)} {' '.join(terms)}\n" for key, terms in related.phrases.items()]
    path.write_text("".join(lines), "utf-8")


class Related:
    """Term → the other terms of its groups, and phrase → the terms of its groups."""

    def __init__(self, groups: Iterable[str], analyzer: Analyzer,
                 near: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """A member written with `_` ("money_back") is a phrase: kept in `phrases` (its words'
        stems, stop words included → the group's single terms), never searched for itself.
        `near`: stem → near stems (`packaged_near`; empty for none)."""
        self.analyzer = analyzer
        self.near = {} if near is None else near
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
        self._set({term: tuple(others) for term, others in out.items() if others},
                  {key: tuple(terms) for key, terms in phrases.items() if terms})

    @classmethod
    def from_stems(cls, tables: Tables, analyzer: Analyzer,
                   near: Mapping[str, tuple[str, ...]] | None = None) -> Related:
        """The tables `__init__` makes, given already made by `analyzer` (`read_synonym_stems`)."""
        made = cls((), analyzer, near)
        made._set(*tables)
        return made

    def with_near(self, near: Mapping[str, tuple[str, ...]]) -> Related:
        """These groups with other near words."""
        return Related.from_stems((self.by_term, self.phrases), self.analyzer, near)

    def _set(self, by_term: dict[str, tuple[str, ...]],
             phrases: dict[tuple[str, ...], tuple[str, ...]]) -> None:
        self.by_term = by_term
        self.phrases = phrases
        self.phrase_lengths = sorted({len(k) for k in phrases}, reverse=True)

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

    def near_terms(self, terms: tuple[str, ...], exclude: Iterable[str],
                   known: Container[str]) -> list[str]:
        """The near words of `terms` (searched at `NEAR_WEIGHT`): for each term, its nearest
        `NEAR_KEEP` that are `known` (indexed) and not in `exclude` (the query's terms and
        related words, which already count more)."""
        skip = set(terms).union(exclude)
        out: dict[str, None] = {}
        for term in terms:
            kept = 0
            for near in self.near.get(term, ()):
                if kept == NEAR_KEEP:
                    break
                if near not in skip and near in known:
                    out[near] = None
                    kept += 1
        return list(out)
