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
    synonyms help the sentence model as they help BM25 (MetaTool rows outside the sample,
    learned glossary: recall@1/@5 0.634/0.860 without them in the vector, 0.696/0.903 with)."""
    entry = index.entries[doc]
    text = f"{split_words(entry.original_name)}: {entry.description}"
    words = " ".join(dict.fromkeys(" ".join(entry.glossary_text()).split()))
    return f"{text} Related: {words}" if words else text


DESCRIPTION_SHARE = 0.5
"""A document's vector is the normalised mix of `document_text`'s vector and, by this share, its
description's alone (the name and glossary words pull the full text's vector their way; the
description alone says what the tool does). Chosen on MetaTool dev split A over 0 (the full text
only), 0.3–0.7 (with the BM25F description boost then at 1.5): hybrid recall@1/@5 0.594/0.814 →
0.607/0.827 (0.6: 0.608/0.827, within one query), confirmed on B 0.582/0.800 → 0.595/0.807. In
the final run (`byref.bench.search.retrieval.hybrid_sweep`) 0 vs 0.5: A 0.595/0.811 vs
0.604/0.825, B 0.578/0.802 vs 0.590/0.805, the real catalog's task queries 0.344/0.594 vs
0.344/0.625 and vocabulary queries 0.433/0.657 vs 0.463/0.672 (0.3–0.7 within 0.003 of each other on
A). Costs a second encode per document, once (cached like the first)."""


NAME_SHARE = 0.2
"""A third view in a document's vector: the tool's name as words alone ("create refund"), at this
weight beside the full text's 1 − DESCRIPTION_SHARE and the description's DESCRIPTION_SHARE
(the mix is normalised). Chosen on MetaTool dev split A over 0.1–0.25 (with description shares
0.3 and 0.5): hybrid recall@1/@5 A 0.604/0.825 → 0.611/0.828, confirmed on B 0.590/0.805 →
0.594/0.808; the real catalog's task queries 0.344/0.625 → 0.375/0.656 and vocabulary queries
0.463/0.672 → 0.448/0.687 (one query down at @1, one up at @5)
(`byref.bench.search.retrieval.hybrid_sweep`). Costs a third, short encode per document, once."""


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
