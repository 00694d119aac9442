"""The texts a tool's vector is made from: its full text, its description alone and its name's
words alone, mixed by weight (`document_views`).

The law: a document's vector is the normalised weighted sum of its views' vectors; the shares
below were chosen on MetaTool dev splits and checked on the real catalog's queries
(`byref.bench.search.retrieval.hybrid_sweep`).
"""

from __future__ import annotations

from byref.discovery.lexical.index import SearchIndex
from byref.discovery.lexical.text import split_words


def document_text(index: SearchIndex, doc: int) -> str:
    """`name: description`, then the glossary's words once each: the curated (or learned)
    synonyms help the sentence model as they help BM25 (docs/NOTES.md#document-text)."""
    entry = index.entries[doc]
    text = f"{split_words(entry.original_name)}: {entry.description}"
    words = " ".join(dict.fromkeys(" ".join(entry.glossary_text()).split()))
    return f"{text} Related: {words}" if words else text


DESCRIPTION_SHARE = 0.5
"""A document's vector mixes `document_text`'s vector with its description's alone, by this share
(the description alone says what the tool does; the name and glossary pull the full text's way).
How it was chosen: docs/NOTES.md#description-share."""


NAME_SHARE = 0.2
"""A third view in a document's vector: the tool's name as words alone ("create refund"), at this
weight (the mix is normalised). How it was chosen: docs/NOTES.md#name-share."""


def document_views(index: SearchIndex, doc: int, share: float = DESCRIPTION_SHARE,
                   name_share: float = NAME_SHARE) -> tuple[tuple[str, float], ...]:
    """(text, weight) of each text whose vector goes into document `doc`'s: `document_text`,
    then the description alone and the name's words alone, each when it is mixed in (a
    weight, and a text different from the full one)."""
    full = document_text(index, doc)
    entry = index.entries[doc]
    description = entry.description.strip()
    views = [(full, 1.0 - share if share > 0 and description and description != full
              else 1.0)]
    if views[0][1] < 1.0:
        views.append((description, share))
    name = split_words(entry.original_name)
    if name_share > 0 and name and name not in (full, description):
        views.append((name, name_share))
    return tuple(views)


def document_texts(index: SearchIndex, doc: int, share: float = DESCRIPTION_SHARE,
                   name_share: float = NAME_SHARE) -> tuple[str, ...]:
    """The texts whose vectors make document `doc`'s (`document_views` without weights)."""
    return tuple(text for text, _ in document_views(index, doc, share, name_share))
