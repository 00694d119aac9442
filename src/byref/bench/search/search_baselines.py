"""Lexical search latency against two kept BM25 engines, bm25s and tantivy, in the same run.

Owns `baseline_latency` (and `baseline_rounds`, several of it): over one catalog, each query
timed on byref's whole search (ranking, excerpts, rows), byref's ranking alone
(`SearchIndex.search`), bm25s as documented (tokenize, retrieve at its default n_threads, in the
calling thread; sparse-matrix BM25, Snowball stems), bm25s's scoring core alone (`get_scores`,
top 10 by numpy) and tantivy (Rust, `en_stem`), interleaved query by query so a loaded machine
slows all alike (which one leads turns with each query); p50/p95 each and byref's ratios to
them; `engines` gives byref's search and the engines' for a new process's first searches
(`lexical_first`). The engines index the same text per tool as byref's fields, joined (name
words, description, tags, glossary, parameters), and return 10. The law: they are bench-only
(`byref[bench]`), imported here and nowhere else; unfiltered queries only (neither filters by
byref's tags).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.lexical.index import FIELDS
from byref.discovery.page.search import Searcher
from byref.errors import install_hint


def _documents(searcher: Searcher) -> list[str]:
    index = searcher.index
    out = []
    for entry in index.entries:
        texts = index.field_texts(entry)
        out.append(" ".join(t for f in FIELDS for t in texts[f]))
    return out


def _bm25s_index(docs: list[str]) -> tuple[Any, Any]:
    """bm25s's index over `docs` and the stemmer its queries are tokenized with."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)
    return retriever, stemmer


def _bm25s(docs: list[str]) -> Callable[[str], Any]:
    import bm25s

    retriever, stemmer = _bm25s_index(docs)

    def search(query: str) -> Any:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        # n_threads left at its default, 0: in this thread (1 starts a thread pool per call,
        # whose hand-offs a loaded machine stretches to several ms)
        return retriever.retrieve(tokens, k=10, show_progress=False)

    return search


def _bm25s_scores(docs: list[str]) -> Callable[[str], Any]:
    """bm25s's scoring core alone: one query's scores over every doc, then the top 10."""
    import bm25s
    import numpy as np

    retriever, stemmer = _bm25s_index(docs)

    def search(query: str) -> Any:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False,
                                return_ids=False)[0]
        scores = retriever.get_scores(tokens) if tokens else np.zeros(len(docs))
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    return search


def _tantivy(docs: list[str]) -> Callable[[str], Any]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    builder.add_integer_field("doc", stored=True)
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for i, text in enumerate(docs):
        writer.add_document(tantivy.Document(body=text, doc=i))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(query: str) -> Any:
        return searcher.search(index.parse_query(query, ["body"]), 10).hits

    return search


def engines(searcher: Searcher) -> dict[str, Callable[[str], Any]]:
    """byref's search and each engine's, by name, over `searcher`'s catalog (the engines'
    indexes built here); raises ImportError without byref[bench]."""
    docs = _documents(searcher)
    return {"byref": searcher.search, "bm25s": _bm25s(docs), "tantivy": _tantivy(docs)}


def interleaved(runs: Mapping[str, Callable[[str], Any]], queries: Sequence[str],
                rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU ms of every run on every query, `rounds` times, query by query; which run
    goes first turns with each query (the first after a query change pays cold caches:
    measured, ~0.15 ms more for whichever leads)."""
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    turn = 0
    for _ in range(rounds):
        for q in queries:
            turn += 1
            for name in names[turn % len(names):] + names[:turn % len(names)]:
                run = runs[name]
                start, used = time.perf_counter(), time.process_time()
                run(q)
                times[name].append((time.perf_counter() - start) * 1e3)
                cpu[name].append((time.process_time() - used) * 1e3)
    return times, cpu


def baseline_rounds(catalog: Catalog, queries: Sequence[str], rounds: int = 5
                    ) -> dict[str, Any]:
    """`baseline_latency` `rounds` times over one catalog (the engines indexed anew each round):
    each round's p50s and ratios, and per ratio the median, least and greatest over the rounds
    (how far a loaded machine moves it)."""
    each = [baseline_latency(catalog, queries) for _ in range(rounds)]
    if "missing" in each[0]:
        return each[0]
    ratios = [k for k in each[0] if k.endswith("_p50") and "_over_" in k]  # wall and CPU
    spread = {}
    for key in ratios:
        values = sorted(r[key] for r in each)
        spread[key] = {"median": round(statistics.median(values), 2), "min": values[0],
                       "max": values[-1]}
    return {"tools": each[0]["tools"], "rounds": each, "ratios": spread}


def baseline_latency(catalog: Catalog, queries: Sequence[str], rounds: int = 5
                     ) -> dict[str, Any]:
    """p50/p95 (ms) of byref's search and ranking and of bm25s and tantivy, interleaved, with
    byref's p50 ratios to each; `{"missing": hint}` when the engines are not installed."""
    try:
        import bm25s  # noqa: F401
        import tantivy  # noqa: F401
    except ImportError:
        return {"missing": f"bm25s and tantivy are not installed: {install_hint('bench')}"}
    searcher = Searcher(catalog)
    docs = _documents(searcher)
    runs: dict[str, Callable[[str], Any]] = {
        "byref_search": searcher.search,
        "byref_ranking": searcher.index.search,
        "bm25s": _bm25s(docs), "bm25s_scores": _bm25s_scores(docs), "tantivy": _tantivy(docs)}
    for q in queries:  # warm every engine (stem memos, caches) before timing
        for run in runs.values():
            run(q)
    times, cpu = interleaved(runs, queries, rounds)
    out: dict[str, Any] = {"tools": len(docs), "searches": len(queries) * rounds}
    for name, ts in times.items():
        ordered = sorted(ts)
        out[name] = {"p50_ms": round(statistics.median(ts), 3),
                     "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
                     "cpu_p50_ms": round(statistics.median(cpu[name]), 3)}
    # CPU time too: on a loaded machine a longer call is preempted more often, so the wall
    # clock stretches byref's search (a few ms) more than an engine's sub-ms call.
    for mine in ("byref_search", "byref_ranking"):
        for other in ("bm25s", "bm25s_scores", "tantivy"):
            out[f"{mine}_over_{other}_p50"] = round(
                out[mine]["p50_ms"] / max(out[other]["p50_ms"], 1e-9), 2)
            out[f"{mine}_over_{other}_cpu_p50"] = round(
                out[mine]["cpu_p50_ms"] / max(out[other]["cpu_p50_ms"], 1e-9), 2)
    return out
