"""Task-style and vocabulary dev queries on the real MCP catalog (2,565 tools): hand-written
needs in plain words with the tools that meet them, read from the .txt files beside this module;
the catalog itself is read from `shared/eval` at run time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from byref.discovery.page.search import Ranker, Searcher

TASK_QUERIES = Path(__file__).with_name("task_queries.txt")


def read_task_queries(path: Path = TASK_QUERIES) -> list[tuple[str, frozenset[str]]]:
    """(query, acceptable tool names) per line of `path`."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, *tools = line.split("\t")
        out.append((query, frozenset(tools)))
    return out


VOCABULARY_QUERIES = Path(__file__).with_name("vocabulary_queries.txt")
VOCABULARY_PHRASINGS = Path(__file__).with_name("vocabulary_phrasings.txt")


def read_phrasings(path: Path = VOCABULARY_PHRASINGS) -> dict[str, list[str]]:
    """query → the other phrasings written for it (search_tools' `also`)."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, *others = line.split("\t")
            out[query] = others
    return out


def task_queries(root: Path, ranker: Ranker | None, path: Path = TASK_QUERIES, *,
                 lexical: bool = True) -> dict[str, Any]:
    """Recall@1/@5 of the hand-written task-style queries in `path` on the 2,565-tool catalog,
    lexical (as is, without the near words, without either vocabulary table) and hybrid; for
    the vocabulary dev queries also with their other phrasings fused
    (`Searcher.search(also=…)`)."""
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    queries = read_task_queries(path)
    known = {e.name for e in catalog}
    unknown = sorted({t for _, tools in queries for t in tools} - known)
    if unknown:
        raise ValueError(f"task_queries.txt names tools the catalog lacks: {unknown!r}")

    def measure(rank: Callable[[str], list[str]]) -> dict[str, float]:
        r1 = r5 = 0
        for query, tools in queries:
            names = rank(query)
            r1 += bool(names) and names[0] in tools
            r5 += bool(tools.intersection(names[:5]))
        return {"recall@1": round(r1 / len(queries), 3), "recall@5": round(r5 / len(queries), 3)}

    def by_index(index: Any) -> Callable[[str], list[str]]:
        return lambda q: [h.entry.name for h in index.search(q, limit=5).hits]

    out: dict[str, Any] = {"queries": len(queries)}
    if lexical:
        out["lexical"] = measure(by_index(catalog.index()))
        out["lexical_without_near_words"] = measure(by_index(catalog.index(near_words=())))
        out["lexical_without_synonyms"] = measure(by_index(catalog.index(synonyms=(),
                                                                         near_words=())))
    if ranker is not None:
        index = catalog.index()
        out["hybrid"] = measure(
            lambda q: [h.entry.name for h in ranker.rank(index, q, None, 5).hits])
    if path == VOCABULARY_QUERIES and lexical:
        also = read_phrasings()
        missing = sorted({q for q, _ in queries} - set(also))
        if missing:
            raise ValueError(f"vocabulary_phrasings.txt lacks the queries {missing!r}")
        for label, fused in (("lexical_also", Searcher(catalog)),
                             ("hybrid_also", Searcher(catalog, ranker=ranker))):
            if label == "hybrid_also" and ranker is None:
                continue
            def rank(q: str, s: Searcher = fused) -> list[str]:
                return [r.name for r in s.search(q, limit=5, also=also[q]).results]
            out[label] = measure(rank)
    return out
