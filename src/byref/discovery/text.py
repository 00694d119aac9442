"""The analyzer: text → search terms, the same way for tool documents and for queries.

The law: one analyzer for both sides. Words are split on anything that is not a letter or a
digit, then at snake_case and camelCase boundaries (`getFileContents` → get, file, contents;
`HTTPServer` → http, server; a word with such a boundary is also kept whole, so "github"
finds "GitHub"), lower-cased, stop words dropped, and stemmed with Porter2 (Snowball
English, via PyStemmer). A query's terms are deduplicated in first-seen order, so repeating a
word buys nothing. Positions of the original words are kept for the excerpt lens.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Container, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import Stemmer

# A "word": a run of letters and digits (Unicode-aware). Underscores and hyphens separate words.
_WORD = re.compile(r"[^\W_]+")
# camelCase / PascalCase / ACRONYMWord boundaries inside one ASCII word; digits stay with the
# letters before them, so `S3`, `s3` and `listS3Buckets` all give "s3".
# An acronym's plural stays one word: `PDFs`, `listURLs` → "pdfs", "urls".
# A word with a camelCase boundary inside ("GitHub", "PostgreSQL"): also indexed whole, so the
# brand a user types in one piece ("github") finds the text that writes it in two.
_MIXED = re.compile(
    r"(?<![^\W_])[A-Za-z0-9]*?(?:[a-z0-9][A-Z]|[A-Z][A-Z][a-z]{2})[A-Za-z0-9]*(?![^\W_])"
)
_BOUNDARY = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]{2}")
_CAMEL_PARTS = r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+\d*|[A-Z]+\d*|\d+"
_CAMEL = re.compile(_CAMEL_PARTS)
# One pass over any text: a word holding a non-ASCII letter whole, else the camel parts.
_SUBWORD = re.compile(r"[^\W_]*[^\x00-\x7f\W_][^\W_]*|" + _CAMEL_PARTS)

def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_WORDS = _wordset(
    """a about above after again all also am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours out over own please same she
    should so some such than that the their theirs them then there these they this those through
    to too under until up us very was we were what when where which while who whom why will with
    would you your yours"""
    # Contraction fragments ("I'm", "don't") and the courtesy words of a request to an agent:
    # they say nothing about which tool is wanted (measured on MetaTool's held-out rows).
    " d ll m re s t ve hello hi hey please thank thanks want wanted like know tell give"
)


@dataclass(frozen=True, slots=True)
class Span:
    """One analyzed word of a text: its term (stem) and where the original word sits."""

    term: str
    start: int
    end: int


class Analyzer:
    """Splits, lower-cases, drops stop words and stems; stems are memoized per word."""

    def __init__(self, stop_words: frozenset[str] = STOP_WORDS) -> None:
        self.stop_words = stop_words
        self._stemmer = Stemmer.Stemmer("english")
        self._memo: dict[str, str] = {}
        self._forms: dict[str, set[str]] = {}
        """Stem → the lower-cased sub-words seen with it (to find a term's hits fast)."""
        """Sub-word as written → its stem, or "" for a stop word."""
        self._lock = threading.Lock()  # a PyStemmer object is not safe to share across threads

    def _term(self, word: str) -> str:
        """The stem of one sub-word as found in the text ("" for a stop word), memoized."""
        lowered = word.lower()
        if len(word) > 2 and word[-1] == "s" and word[:-1].isupper():
            lowered = lowered[:-1]  # "PDFs" is the plural of "PDF"
        if lowered in self.stop_words:
            stem = ""
        else:
            with self._lock:
                stem = self._stemmer.stemWord(lowered)
            self._forms.setdefault(stem, set()).add(word.lower())
        self._memo[word] = stem
        return stem

    def stem(self, word: str) -> str:
        hit = self._memo.get(word)
        return hit if hit is not None else self._term(word)

    def subwords(self, text: str) -> list[str]:
        """The sub-words of `text` as written (not lower-cased): camel parts, then the whole
        camel words, then (in place) words with non-ASCII letters, which are not split."""
        out: list[str] = (_CAMEL if text.isascii() else _SUBWORD).findall(text)
        if _BOUNDARY.search(text):
            out.extend(_MIXED.findall(text))
        return out

    def words(self, text: str) -> Iterator[tuple[str, int, int]]:
        """Lower-cased sub-words with their character offsets, stop words included."""
        for match in _WORD.finditer(text):
            token = match.group()
            base = match.start()
            if not token.isascii():
                yield token.lower(), base, match.end()
                continue
            for part in _CAMEL.finditer(token):
                yield part.group().lower(), base + part.start(), base + part.end()

    def spans(self, text: str, wanted: Collection[str] | None = None) -> list[Span]:
        """The indexed words of `text` as (term, start, end), in order; only `wanted` terms
        when given (the excerpt lens needs the hits, not every word)."""
        if wanted is not None and len(text.lower()) == len(text):
            return self._hits(text, wanted)
        return self._spans(text, wanted)

    def _hits(self, text: str, wanted: Collection[str]) -> list[Span]:
        """`spans` for a few wanted terms without analyzing every word: every sub-word of the
        text is memoized first (set operations), so each wanted stem's surface forms are
        known; a case-insensitive search for those forms finds the candidate words, and only
        those are analyzed. Same result as the full scan (a property test checks it)."""
        memo = self._memo
        for word in set(self.subwords(text)).difference(memo):
            self._term(word)
        forms = sorted(set().union(*(self._forms.get(t, ()) for t in wanted)), key=len)
        if not forms:
            return []
        starts: dict[int, int] = {}
        for match in _forms_pattern(tuple(forms)).finditer(text):
            start, end = match.start(), match.end()
            while start > 0 and _is_word_char(text[start - 1]):
                start -= 1
            while end < len(text) and _is_word_char(text[end]):
                end += 1
            starts[start] = end
        out: list[Span] = []
        for start in sorted(starts):
            for span in self._spans(text[start:starts[start]], wanted):
                out.append(Span(span.term, span.start + start, span.end + start))
        return out

    def _spans(self, text: str, wanted: Container[str] | None) -> list[Span]:
        out = []
        memo, miss = self._memo, self._term
        for match in _WORD.finditer(text):
            token = match.group()
            if (token.isalpha() and token.islower()) or not token.isascii():
                stem = memo[token] if token in memo else miss(token)
                if stem and (wanted is None or stem in wanted):
                    out.append(Span(stem, match.start(), match.end()))
                continue
            base = match.start()
            parts = list(_CAMEL.finditer(token))
            for part in parts:
                word = part.group()
                stem = memo[word] if word in memo else miss(word)
                if stem and (wanted is None or stem in wanted):
                    out.append(Span(stem, base + part.start(), base + part.end()))
            if len(parts) > 1 and _MIXED.fullmatch(token):
                stem = memo[token] if token in memo else miss(token)
                if stem and (wanted is None or stem in wanted):
                    out.append(Span(stem, base, match.end()))
        return out

    def terms(self, text: str) -> list[str]:
        """The terms of `text`, in order, repeats kept (document side)."""
        memo, miss = self._memo, self._term
        stems = [memo[w] if w in memo else miss(w) for w in self.subwords(text)]
        return [s for s in stems if s]

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in first-seen order."""
        return list(dict.fromkeys(self.terms(text)))

    def terms_of_all(self, texts: Iterable[str]) -> list[str]:
        return self.terms("\n".join(texts))


def _is_word_char(char: str) -> bool:
    return char.isalnum()


@lru_cache(maxsize=512)
def _forms_pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(f) for f in reversed(forms)), re.IGNORECASE)


def split_words(name: str) -> str:
    """A tool or capability name as plain words: `add_label_to_work_item` → "add label to work
    item", `work-item:create` → "work item create", `getFileContents` → "get file contents"."""
    return " ".join(w.lower() for w in ANALYZER.subwords(name))


ANALYZER = Analyzer()
"""The process-wide analyzer (its stem memo is shared by every index)."""
