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
from collections.abc import Collection, Container, Iterable, Iterator, Sequence
from itertools import compress
from typing import NamedTuple

import Stemmer

# A "word": a run of letters and digits (Unicode-aware). Underscores and hyphens separate words.
_WORD = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
"""`_WORD` on ASCII text (the same words; a third faster)."""
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
    # The filler of a request ("Could you kindly provide detailed information …"): measured on
    # MetaTool rows outside the reported sample, dropping them lifted recall@5 from 0.628 to 0.633.
    # Action verbs tools are named by (find, get, show, list, use) stay searchable.
    """ provide specific specifically help need information looking assist assistance
    detailed recommend recommendation suggest suggestion interested interest available may
    might kindly appreciate greatly possible able sure way ways various comprehensive
    something anything someone thing things tips really many much lot"""
)


class Span(NamedTuple):
    """One analyzed word of a text: its term (stem) and where the original word sits (a
    named tuple: a page's lens makes ~150, and a tuple is made at half a dataclass's cost)."""

    term: str
    start: int
    end: int


Words = tuple[list[str], frozenset[str]]
"""A text's words in order, and as a set (`Analyzer.words_of`)."""


class Analyzer:
    """Splits, lower-cases, drops stop words and stems; stems are memoized per word."""

    def __init__(self, stop_words: frozenset[str] = STOP_WORDS) -> None:
        self.stop_words = stop_words
        self._stemmer = Stemmer.Stemmer("english")
        self._memo: dict[str, str] = {}
        """Sub-word as written → its stem, or "" for a stop word."""
        self._lock = threading.Lock()  # a PyStemmer object is not safe to share across threads
        self._plain: dict[str, str] = {}
        """Lower-cased word → its stem, stop words included (`plain_stems`)."""
        self._word_spans: dict[str, tuple[Span, ...]] = {}
        """Word → its spans relative to the word (the lens locates hits word by word)."""
        self._word_terms: dict[str, tuple[str, ...]] = {}
        """Word (a run of letters and digits, as written) → its terms: the document side's
        memo, so a text costs one simple regex pass and one dictionary lookup per word."""
        self._words_of: dict[str, set[str]] = {}
        """Term → the words (as written) in `_word_terms` holding it (the lens's hits)."""

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
        self._memo[word] = stem
        return stem

    def stem(self, word: str) -> str:
        """The stem of one sub-word ("" for a stop word), memoized."""
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

    def words_of(self, text: str) -> Words | None:
        """`text`'s words in order and as a set (one simple regex pass), every one learned:
        what `hits` locates terms with, so a text searched often is split once (`page.texts`).
        None for a text whose lower-casing changes its length (`spans` scans those whole)."""
        if len(text.lower()) != len(text):
            return None
        every = (_ASCII_WORD if text.isascii() else _WORD).findall(text)
        words = frozenset(every)
        missing = words.difference(self._word_terms)
        if missing:
            self._learn(missing)
        return every, words

    def hits(self, text: str, wanted: Collection[str], words: Words | None) -> list[Span]:
        """`spans(text, wanted)`, given `words_of(text)` (made once for a text searched often)."""
        if words is None:
            return self._spans(text, wanted)
        return self._located(text, wanted, words)

    def _hits(self, text: str, wanted: Collection[str]) -> list[Span]:
        """`spans` for a few wanted terms without analyzing every word: the text's words are
        looked up in the word memo (one simple regex pass; a document's words are known from
        indexing it), and only the words holding a wanted term are found again and split into
        spans. Same result as the full scan (a property test checks it)."""
        words = self.words_of(text)
        assert words is not None  # `spans` asks only for a text whose lower-casing keeps it
        return self._located(text, wanted, words)

    def _located(self, text: str, wanted: Collection[str], found: Words) -> list[Span]:
        every, words = found
        want = wanted if isinstance(wanted, (set, frozenset)) else set(wanted)
        words_of = self._words_of
        hit = set().union(*(words.intersection(words_of[t]) for t in want if t in words_of))
        if not hit:
            return []
        out: list[Span] = []
        spans_of = self._word_spans
        at = 0
        # The hit words in text order, each found from the end of the one before: no word
        # between them is a hit, so the next occurrence standing alone (no letter or digit on
        # either side; isalnum is the regex's [^\W_]) is this word.
        for word in compress(every, map(hit.__contains__, every)):
            at = text.find(word, at)
            end = at + len(word)
            while (at and text[at - 1].isalnum()) or (end < len(text) and text[end].isalnum()):
                at = text.find(word, at + 1)
                end = at + len(word)
            pieces = spans_of.get(word)
            if pieces is None:
                pieces = spans_of[word] = tuple(self._spans(word, None))
            out.extend(Span(p.term, p.start + at, p.end + at) for p in pieces
                       if p.term in want)
            at = end
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

    def plain_stems(self, text: str) -> list[str]:
        """The stem of every word of `text` in order, stop words included (phrase matching:
        "turn off" and "money back" need their small words)."""
        out = []
        for word, _, _ in self.words(text):
            stem = self._plain.get(word)
            if stem is None:
                with self._lock:
                    stem = self._plain[word] = self._stemmer.stemWord(word)
            out.append(stem)
        return out

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, in first-seen order."""
        return list(dict.fromkeys(self.terms(text)))

    def terms_of_all(self, texts: Iterable[str]) -> list[str]:
        """The terms of `texts`, repeats kept, grouped by word (the same multiset as `terms`;
        only the order of a camelCase word's whole form differs, which a document ignores)."""
        words = _WORD.findall("\n".join(texts))
        memo = self._word_terms
        try:
            return [t for w in words for t in memo[w]]
        except KeyError:  # new words: learn them all at once
            self._learn(set(words).difference(memo))
            return [t for w in words for t in memo[w]]

    def terms_of_each(self, groups: Iterable[Sequence[str]]) -> list[list[str]]:
        """`terms_of_all` of each group of texts, the new words of all of them split and
        stemmed in one batch (an index build: a cold analyzer learns a whole catalog at once,
        not text by text)."""
        split = []
        for texts in groups:
            text = texts[0] if len(texts) == 1 else "\n".join(texts)
            split.append((_ASCII_WORD if text.isascii() else _WORD).findall(text))
        memo = self._word_terms
        new = set().union(*split).difference(memo)
        if new:
            self._learn(new)
        return [[t for w in words for t in memo[w]] for words in split]

    def _learn(self, words: Iterable[str]) -> None:
        """Memoize the terms of new words, stemming their unseen sub-words in one batch."""
        memo = self._memo
        # A lower-case word of letters is its own one sub-word, already lower-case (most of a
        # description's words): set operations sort them, the rest are split word by word.
        plain: list[str] = []
        other: list[str] = []
        for w in words:
            (plain if w.isalpha() and w.islower() and w.isascii() else other).append(w)
        parts = {w: self.subwords(w) for w in other}
        fresh = {p for ps in parts.values() for p in ps}.difference(memo)
        lowered = {}
        for word in fresh:
            low = word.lower()
            if len(word) > 2 and word[-1] == "s" and word[:-1].isupper():
                low = low[:-1]  # "PDFs" is the plural of "PDF"
            lowered[word] = low
        new_plain = set(plain).difference(memo)
        stemmable = list(new_plain.union(lowered.values()).difference(self.stop_words))
        with self._lock:
            stems = dict(zip(stemmable, self._stemmer.stemWords(stemmable), strict=True))
        memo.update(dict.fromkeys(new_plain, ""))  # stop words keep ""
        memo.update((w, stems[w]) for w in new_plain.intersection(stems))
        for word, low in lowered.items():
            memo[word] = stems.get(low, "")
        terms, words_of = self._word_terms, self._words_of
        for w in plain:
            stem = memo[w]
            terms[w] = (stem,) if stem else ()
            if stem:
                words_of.setdefault(stem, set()).add(w)
        for word, ps in parts.items():
            found = terms[word] = tuple(memo[p] for p in ps if memo[p])
            for term in found:
                words_of.setdefault(term, set()).add(word)

def split_words(name: str) -> str:
    """A tool or capability name as plain words: `add_label_to_work_item` → "add label to work
    item", `work-item:create` → "work item create", `getFileContents` → "get file contents"."""
    return " ".join(w.lower() for w in ANALYZER.subwords(name))


ANALYZER = Analyzer()
"""The process-wide analyzer (its stem memo is shared by every index)."""
