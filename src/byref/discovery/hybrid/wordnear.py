"""Word-level evidence for abstention: which of a query's words no leading tool has a word near.

The law: every distinct word of the tools' embedded texts (`documents.document_text`) is encoded
alone, once per catalog version (cached like the document vectors); a query word is *weak* when
no word of the `WORD_DOCS` leading tools of a hybrid ranking comes within `WORD_NEAR` cosine of
it (its own vector: the catalog's, else encoded alone). The weak share is the weak words' part of
the query's term weight (`ranking`'s w(t): rare and unknown words weigh most); a word written as
a name (a capital inside the query, a digit) is never weak, since a catalog rarely lists the
places, people and repositories its tools act on. It catches the need whose object no tool
handles ("start the robot lawnmower") where the page-level cosine is carried by a generic verb.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from byref.discovery.lexical.text import Analyzer, split_words

if TYPE_CHECKING:
    from byref.discovery.lexical.index import SearchIndex

WORD_DOCS = 10
"""Leading tools whose words a query word is compared with."""
WORD_NEAR = 0.55
"""A query word this near (cosine, all-MiniLM-L6-v2, each word encoded alone) to a leading
tool's word is matched. Chosen with `abstain.WEAK_SHARE` (see there)."""


def text_words(text: str, analyzer: Analyzer) -> list[str]:
    """The distinct lower-cased words of `text` that carry a search term (no stop words)."""
    return list(dict.fromkeys(w for w, _, _ in analyzer.words(text) if analyzer.terms(w)))


def document_words(index: SearchIndex, doc: int) -> list[str]:
    """The words of document `doc`'s embedded text (its name's, description's and glossary's;
    `documents.document_text` without its label)."""
    entry = index.entries[doc]
    return text_words(" ".join([split_words(entry.original_name), entry.description,
                                *entry.glossary_text()]), index.analyzer)


class CatalogWords:
    """The words of each document's text, and one unit vector per distinct word."""

    def __init__(self, per_doc: list[list[str]], vectors: Mapping[str, Any]) -> None:
        """`per_doc`: each document's words (`text_words`); `vectors`: word → its vector."""
        import numpy as np

        self.rows = {w: i for i, w in enumerate(dict.fromkeys(w for ws in per_doc for w in ws))}
        dim = next(iter(vectors.values())).shape[0] if vectors else 0
        self.matrix = (np.stack([vectors[w] for w in self.rows]).astype(np.float32)
                       if self.rows else np.zeros((0, dim), np.float32))
        self.docs = [np.fromiter((self.rows[w] for w in ws), np.int64, len(ws))
                     for ws in per_doc]

    def weak_share(self, query: str, weights: Mapping[str, float], analyzer: Analyzer,
                   docs: Iterable[int], vectors_of: Callable[[list[str]], Any]) -> float:
        """The share of the query's word weight (`weights`: term → w(t)) in words no word of
        `docs` comes within `WORD_NEAR` of; `vectors_of` encodes the words the catalog lacks
        (one row each, in one call)."""
        import numpy as np

        words: dict[str, float] = {}
        names: set[str] = set()
        for word, start, _ in analyzer.words(query):
            weight = sum(weights.get(t, 0.0) for t in analyzer.terms(word))
            if weight <= 0:
                continue
            words[word] = words.get(word, 0.0) + weight
            if any(c.isdigit() for c in word) or (start > 0 and query[start].isupper()):
                names.add(word)
        total = sum(words.values())
        asked = [w for w in words if w not in names]
        picked = [self.docs[d] for d in docs if d < len(self.docs)]
        if total <= 0 or not asked:
            return 0.0
        if not picked or not (rows := np.unique(np.concatenate(picked))).size:
            return sum(words[w] for w in asked) / total
        lacking = [w for w in asked if w not in self.rows]
        made = dict(zip(lacking, vectors_of(lacking), strict=True)) if lacking else {}
        own = np.stack([self.matrix[self.rows[w]] if w in self.rows else made[w]
                        for w in asked]).astype(np.float32)
        # einsum, not `@`: small products stay on this thread (see embed.HybridRanker.fused)
        near = np.einsum("ij,kj->ik", own, self.matrix[rows]).max(axis=1)
        return sum(words[w] for w, n in zip(asked, near, strict=True) if n < WORD_NEAR) / total
