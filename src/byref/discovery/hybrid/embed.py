"""Optional hybrid retrieval: a packaged local sentence-embedding model fused with the lexical
scores (the `embeddings` extra).

The law: off by default, imported only when asked for, and never fetches anything (the encoder
is a setting, `encoder.load_encoder`: all-MiniLM-L6-v2 as a packaged int8 ONNX file by default,
one thread a query).
Fusion is a convex combination over the filtered candidates of the BM25F score divided by the
best one and the cosine similarity min-max scaled over the candidates: one weight,
`LEXICAL_WEIGHT`, chosen on a MetaTool dev split outside the reported sample and confirmed on a
second disjoint one (`byref.bench.search.retrieval.fusion_sweep`). An exact tool name still ranks
first. Document vectors are computed once per catalog version, and only for texts that changed;
an encoder with a `model_id` also keeps them on disk (`vectorcache`), so a restart encodes only
new texts. In `background` mode (the gateway's) no search waits on encoding, nor more than
`WARM_WAIT_S` on reading them: until a thread has read or encoded them, a search is the index's
lexical one. A hybrid ranking
carries its query's cosines summarised (`Similarity`) and the share of its words no leading
tool has a word near (`wordnear`, whose word vectors are made and cached with the documents'):
the embedding's side of abstention.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from byref.discovery.hybrid.documents import DESCRIPTION_SHARE, NAME_SHARE, document_views
from byref.discovery.hybrid.encoder import INSTALL_HINT, Encoder, load_encoder
from byref.discovery.hybrid.vectorcache import VectorCache, cache_dir
from byref.discovery.hybrid.warming import STOP_WAIT_S, Warming
from byref.discovery.hybrid.wordnear import WORD_DOCS, CatalogWords, document_words
from byref.discovery.lexical.index import (
    RERANK_DEPTH,
    Filters,
    Ranking,
    Rerank,
    Scored,
    SearchIndex,
    arrange,
)
from byref.discovery.lexical.ranking import GAP_RANK, Similarity
from byref.discovery.page.abstain import words_may_decide
from byref.errors import InvalidValue

__all__ = ["INSTALL_HINT", "LEXICAL_WEIGHT", "Encoder", "HybridRanker"]

LEXICAL_WEIGHT = 0.3
"""The lexical share of the fused score (the embedding's is 1 − it). How it was chosen:
docs/NOTES.md#lexical-weight."""
HYBRID_K1 = 2.0
"""The lexical side of the hybrid keeps k1 2.0 (an index variant built once per catalog version)
while lexical search alone moved to 6 (`index.K1`): fused with the embedding at weight 0.3, k1 6
gave A 0.604/0.825 and the real catalog's task queries 0.312/0.594 against 0.610/0.828 and
0.375/0.656 at k1 2.0."""
HYBRID_RERANK: Rerank = "none"
"""Seed 001's keys do not re-order the fused order (fused scores do not tie). How it was chosen:
docs/NOTES.md#hybrid-rerank."""
DENSITY_WEIGHT = 0.0
"""How much a tool's neighbourhood density (its mean cosine to its `DENSITY_K` nearest tools) adds
to its query similarity: off, since a crowded region of a real catalog is one server's family of
narrow tools. How it was chosen: docs/NOTES.md#density-weight."""
DENSITY_K = 10
WARM_WAIT_S = 0.1
"""How long a search in `background` mode waits for the document vectors to be read from the
vector cache before it answers lexically; once the thread is encoding, it waits no more."""
WARM_POLL_S = 0.005
ENCODE_BATCH = 256
"""Document texts encoded per call: a stop (`HybridRanker.stop`) waits for one batch at most."""

QUERY_CACHE = 256
"""Query vectors kept (a model re-asking, alternative phrasings, the benchmark's splits)."""


def summarise(similarity: Any) -> Similarity | None:
    """The best, mean and best-minus-`GAP_RANK`-th of a query's cosines (None: no candidate)."""
    import numpy as np

    if not len(similarity):
        return None
    k = min(GAP_RANK, len(similarity))
    top = -np.partition(-similarity, k - 1)[:k]
    return Similarity(float(top.max()), float(similarity.mean()), float(top.max() - top.min()))


class HybridRanker:
    """Implements `search.Ranker`: lexical scores fused with embedding similarity.

    `vector_cache` is the directory of the on-disk document vectors (default $BYREF_VECTOR_CACHE,
    else the user's cache dir; `"off"` disables it). It is used only when the encoder has a
    `model_id`."""

    def __init__(
        self,
        encoder: Encoder | str | Path | None = None,
        *,
        lexical_weight: float = LEXICAL_WEIGHT,
        rerank: Rerank = HYBRID_RERANK,
        query_cache: int = QUERY_CACHE,
        vector_cache: str | Path | None = None,
        density_weight: float = DENSITY_WEIGHT,
        description_share: float = DESCRIPTION_SHARE,
        name_share: float = NAME_SHARE,
        background: bool = False,
    ) -> None:
        """`encoder`: an encoder, or the name or path of a packaged ONNX sentence encoder
        (`encoder.load_encoder`; None: $BYREF_EMBEDDING_MODEL, else the packaged default),
        built on first use. `background`: a search whose document vectors are not ready
        within `WARM_WAIT_S` answers lexically (the index's own ranking) while a thread makes
        them; the first search after them is hybrid. Without it, a search waits for the
        encoding."""
        if not 0.0 <= lexical_weight <= 1.0:
            raise InvalidValue(f"lexical_weight {lexical_weight!r} must lie in [0, 1].")
        self._encoder: Encoder | str | Path | None = encoder
        self.lexical_weight = lexical_weight
        self.density_weight = density_weight
        if not 0.0 <= description_share <= 1.0:
            raise InvalidValue(f"description_share {description_share!r} must lie in [0, 1].")
        self.description_share = description_share
        if not 0.0 <= name_share <= 1.0:
            raise InvalidValue(f"name_share {name_share!r} must lie in [0, 1].")
        self.name_share = name_share
        self._density: dict[int, tuple[Any, Any]] = {}
        self.rerank: Rerank = rerank
        self._vectors: dict[int, tuple[SearchIndex, Any]] = {}
        self._words: dict[int, tuple[SearchIndex, CatalogWords]] = {}
        self._by_text: dict[str, Any] = {}
        """Document text → its vector, for the latest index: a rebuilt index (a tool added, a
        description changed, a glossary learned) re-encodes only the texts that changed."""
        self.query_cache = query_cache
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._best = threading.local()
        """The best raw cosine of this thread's last `fused` (the abstention evidence)."""
        self.vector_cache = vector_cache
        self.cache_dir = cache_dir(vector_cache)
        self.encoded = 0
        """Document texts this ranker sent to the encoder (neither in memory nor on disk)."""
        self.from_disk = 0
        """Document texts whose vectors came from the on-disk cache."""
        self.background = background
        self.lexical_answers = 0
        """Searches answered lexically because the vectors were not ready (`background`)."""
        self._warming = Warming()
        self._making = threading.Lock()
        self._encoding = threading.Event()
        """Set while a thread encodes documents (a background search then does not wait)."""

    def with_weight(self, lexical_weight: float, rerank: Rerank | None = None,
                    density_weight: float | None = None,
                    description_share: float | None = None,
                    name_share: float | None = None) -> HybridRanker:
        """Another weight (or re-rank, density weight, description share) over the same
        encoder and text and query vectors."""
        other = HybridRanker(self._encoder, lexical_weight=lexical_weight,
                             rerank=self.rerank if rerank is None else rerank,
                             query_cache=self.query_cache, vector_cache=self.vector_cache,
                             density_weight=(self.density_weight if density_weight is None
                                             else density_weight),
                             description_share=(self.description_share
                                                if description_share is None
                                                else description_share),
                             name_share=self.name_share if name_share is None else name_share)
        with self._lock:
            other._by_text = self._by_text
            other._queries = self._queries
        return other

    @property
    def encoder(self) -> Encoder:
        """The sentence encoder (the packaged ONNX MiniLM unless one was named), built on use."""
        if self._encoder is None or isinstance(self._encoder, (str, Path)):
            self._encoder = load_encoder(self._encoder)
        return self._encoder

    def disk_cache(self) -> VectorCache | None:
        """The on-disk vectors of this encoder's model, or None (cache off, or an encoder
        without a `model_id`)."""
        model_id = getattr(self.encoder, "model_id", None)
        if self.cache_dir is None or not isinstance(model_id, str):
            return None
        return VectorCache(self.cache_dir, model_id)

    def vectors(self, index: SearchIndex) -> Any:
        """One unit-length row per document of `index` (cached per index and per text)."""
        with self._lock:
            hit = self._vectors.get(id(index))
            if hit is not None and hit[0] is index:
                return hit[1]
        with self._making:  # one maker at a time: a second finds the first's vectors
            return self._make_vectors(index)

    def _make_vectors(self, index: SearchIndex) -> Any:
        with self._lock:
            hit = self._vectors.get(id(index))
            if hit is not None and hit[0] is index:
                return hit[1]
        import numpy as np

        per_doc = [document_views(index, d, self.description_share, self.name_share)
                   for d in range(len(index))]
        words = [document_words(index, d) for d in range(len(index))]
        texts = list(dict.fromkeys([*(t for views in per_doc for t, _ in views),
                                    *(w for ws in words for w in ws)]))
        with self._lock:
            known = self._by_text
        fresh = list(dict.fromkeys(t for t in texts if t not in known))
        disk = self.disk_cache() if fresh else None
        if disk is not None:
            stored = disk.lookup(fresh)
            with self._lock:
                self.from_disk += len(stored)
            known = {**known, **stored}
            fresh = [t for t in fresh if t not in stored]
        if fresh:
            made: dict[str, Any] = {}
            self._encoding.set()
            try:
                for start in range(0, len(fresh), ENCODE_BATCH):
                    self._warming.check()
                    chunk = fresh[start:start + ENCODE_BATCH]
                    made.update(zip(chunk, self.encoder.encode(chunk), strict=True))
            finally:
                self._encoding.clear()
                with self._lock:
                    self.encoded += len(made)
                if disk is not None:
                    disk.store(made, used=texts)  # what was made survives a stop
            known = {**known, **made}
        dim = next(iter(known.values())).shape[0] if known else 0
        if not per_doc:
            matrix = np.zeros((0, dim))
        else:
            matrix = np.stack([known[views[0][0]] for views in per_doc]).astype(np.float32)
            for i, views in enumerate(per_doc):
                if len(views) > 1:
                    row = sum(weight * known[text] for text, weight in views)
                    matrix[i] = row / np.linalg.norm(row)
        catalog_words = CatalogWords(words, known)
        with self._lock:
            self._vectors = {id(index): (index, matrix)}
            self._words = {id(index): (index, catalog_words)}
            self._by_text = {t: known[t] for t in texts}
        return matrix

    def catalog_words(self, index: SearchIndex) -> CatalogWords:
        """`index`'s words and their vectors (`wordnear`), made with its document vectors."""
        self.vectors(index)
        with self._lock:
            return self._words[id(index)][1]

    def _on_disk(self) -> bool:
        """Whether the vector cache holds any model's vectors (reading them may be worth a
        short wait)."""
        folder = self.cache_dir
        return folder is not None and folder.is_dir() and any(folder.glob("*.vec"))

    def ready(self, index: SearchIndex) -> bool:
        """Whether `index`'s document vectors are in memory (a search needs no encoding)."""
        with self._lock:
            hit = self._vectors.get(id(index))
            return hit is not None and hit[0] is index

    def warm(self, index: SearchIndex) -> threading.Thread:
        """Starts (once per index) a daemon thread loading the encoder and `index`'s vectors
        (from the cache, else encoded); returns it."""
        def work() -> None:
            self.vectors(index)
            index.variant(k1=HYBRID_K1)  # the fusion's lexical side, built once
            self.query_vector("")  # the encoder's session and tokenizer, loaded once

        return self._warming.once(index, work)

    def prepare(self, index_of: Callable[[], SearchIndex]) -> threading.Thread:
        """Warms on a thread the index `index_of()` builds (a gateway calls this when its
        catalog changes, so the first search after a restart finds the vectors ready)."""
        return self._warming.start(lambda: self.warm(index_of()).join())

    def stop(self, timeout: float = STOP_WAIT_S) -> None:
        """Stops this ranker's background encoding after its current batch and waits for it
        (`warming.Warming.stop`)."""
        self._warming.stop(timeout)

    def density(self, index: SearchIndex) -> Any:
        """Each document's mean cosine to its `DENSITY_K` nearest other documents (cached per
        document matrix; computed in row blocks, so 10,000 tools need no 10,000² matrix)."""
        import numpy as np

        matrix = self.vectors(index)
        with self._lock:
            hit = self._density.get(id(index))
            if hit is not None and hit[0] is matrix:
                return hit[1]
        n = len(matrix)
        k = min(DENSITY_K, n - 1)
        out = np.zeros(n)
        if k > 0:
            for start in range(0, n, 1024):
                block = matrix[start:start + 1024] @ matrix.T
                rows = np.arange(len(block))
                block[rows, rows + start] = -np.inf  # not its own neighbour
                out[start:start + len(block)] = -np.partition(-block, k - 1, axis=1)[
                    :, :k].mean(axis=1)
        with self._lock:
            self._density = {id(index): (matrix, out)}
        return out

    def query_vector(self, query: str) -> Any:
        """The query's vector (from a bounded LRU of recent queries)."""
        with self._lock:
            vector = self._queries.get(query)
            if vector is not None:
                self._queries.move_to_end(query)
                return vector
        vector = self.encoder.encode([query])[0]
        if self.query_cache <= 0:
            return vector
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > self.query_cache:
                self._queries.popitem(last=False)
        return vector

    def word_vectors(self, words: list[str]) -> Any:
        """One row per word (each encoded alone): from the query LRU, the rest in one call."""
        with self._lock:
            found = {w: self._queries[w] for w in words if w in self._queries}
        fresh = [w for w in dict.fromkeys(words) if w not in found]
        if fresh:
            made = dict(zip(fresh, self.encoder.encode(fresh), strict=True))
            found.update(made)
            if self.query_cache > 0:
                with self._lock:
                    self._queries.update(made)
                    while len(self._queries) > self.query_cache:
                        self._queries.popitem(last=False)
        return [found[w] for w in words]

    def fused(self, index: SearchIndex, query: str,
              filters: Filters | None) -> tuple[Scored, Any, Any]:
        """(lexical scoring, candidate docs, fused score of each) for one phrasing."""
        import numpy as np

        # Without the near words: the query vector already brings the model's vocabulary, and
        # with them the hybrid was not better on split B (see related.NEAR_WEIGHT).
        scored = index.variant(k1=HYBRID_K1).score(query, filters, near=False)
        n = len(index)
        pool = (np.arange(n) if scored.cands is None
                else np.fromiter(sorted(scored.cands), dtype=np.int64, count=len(scored.cands)))
        lexical = np.zeros(n)
        if scored.scores:
            lexical[np.fromiter(scored.scores.keys(), np.int64, len(scored.scores))] = (
                np.fromiter(scored.scores.values(), np.float64, len(scored.scores)))
        lexical = lexical[pool]
        top = lexical.max() if len(pool) else 0.0
        if top > 0:
            lexical /= top
        # einsum, not `@`: the matrix-vector product stays on this thread (a BLAS `@` fans out
        # to its own threads, and on a loaded 2-core machine it was measured at 8 ms instead of
        # 0.04 ms; einsum takes 0.2 ms at 2,565 tools every time).
        similarity = np.einsum("ij,j->i", self.vectors(index),
                               self.query_vector(query))[pool].astype(np.float64)
        self._best.value = summarise(similarity)
        if self.density_weight:
            similarity += self.density_weight * self.density(index)[pool]
        low, high = (similarity.min(), similarity.max()) if len(pool) else (0.0, 0.0)
        semantic = (similarity - low) / (high - low) if high > low else np.zeros(len(pool))
        a = self.lexical_weight
        return scored, pool, a * lexical + (1.0 - a) * semantic

    def rank(self, index: SearchIndex, query: str, filters: Filters | None,
             limit: int) -> Ranking:
        """The top `limit` of the fused order (an exact name first), as `search.Ranker` asks."""
        import numpy as np

        if not len(index):
            return index.search(query, filters=filters, limit=limit)
        if self.background:
            warming = self.warm(index)
            deadline = time.monotonic() + WARM_WAIT_S
            # nothing on disk (a first-ever start): they can only be encoded, so no wait
            while (warming.is_alive() and not self._encoding.is_set() and self._on_disk()
                   and (left := deadline - time.monotonic()) > 0):
                warming.join(min(WARM_POLL_S, left))
            if warming.is_alive() or not self.ready(index):
                with self._lock:
                    self.lexical_answers += 1
                return index.search(query, filters=filters, limit=limit)
        scored, pool, fused = self.fused(index, query, filters)
        keep = min(len(pool), max(limit + 1, RERANK_DEPTH))
        best = np.argpartition(-fused, keep - 1)[:keep] if keep < len(pool) else range(len(pool))
        scores = {int(pool[i]): float(fused[i]) for i in best}
        order = arrange(scored, scores, self.rerank, limit)
        similarity = getattr(self._best, "value", None)
        if similarity is not None and scored.terms and words_may_decide(similarity):
            leading = pool[np.argpartition(-fused, WORD_DOCS - 1)[:WORD_DOCS]
                           if len(pool) > WORD_DOCS else slice(None)]
            weak = self.catalog_words(index).weak_share(
                query, scored.weights, index.analyzer, (int(d) for d in leading),
                self.word_vectors)
            similarity = replace(similarity, weak=weak)
        return replace(scored.ranking(index, order, scores), similarity=similarity)
