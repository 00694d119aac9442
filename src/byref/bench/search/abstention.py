"""How often a search abstains (`discovery.page.abstain`): on needs no tool answers, and on the
answerable sets, with recall@5 with and without abstention.

Unanswerable needs are `unanswerable_queries.txt` (beside this module; written by hand): the
even lines tune the thresholds, the odd lines are held apart and reported; the answerable sets'
even and odd rows likewise. `unanswerable_fresh.txt`, written after the rule was chosen, is
reported whole (as held apart; its tuning share is 0, nothing was tuned on it). Answerable sets are
MetaTool's fixed sample (its first `METATOOL_ROWS` rows) over MetaTool's catalog and the real
catalog's task and vocabulary queries over the 2,565 tools; both catalogs are read from
`shared/eval` at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.page.search import Ranker, Searcher

T = TypeVar("T")
UNANSWERABLE = Path(__file__).with_name("unanswerable_queries.txt")
FRESH = Path(__file__).with_name("unanswerable_fresh.txt")
"""Needs written after the rule was chosen (never tuned on): all reported, none tuned."""
METATOOL_ROWS = 1000
"""MetaTool sample rows measured (the hybrid encodes each query once)."""


def read_unanswerable(path: Path = UNANSWERABLE) -> list[tuple[str, str]]:
    """(query, where) per line: `where` is "mcp" for a need only the MCP catalog lacks,
    else "both"."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            query, _, where = line.partition("\t")
            out.append((query.strip(), where.strip() or "both"))
    return out


def split(queries: Sequence[T]) -> tuple[list[T], list[T]]:
    """(tuning, held apart): the even and the odd positions."""
    return list(queries[0::2]), list(queries[1::2])


def rate(searcher: Searcher, queries: Iterable[str]) -> float:
    """The share of `queries` whose page abstained."""
    queries = list(queries)
    abstained = sum(searcher.search(q, limit=5).abstained for q in queries)
    return round(abstained / (len(queries) or 1), 3)


def answerable(searcher: Searcher, rows: Sequence[tuple[str, frozenset[str]]],
               key: str = "name") -> dict[str, float]:
    """Abstention rate and recall@5 with abstention and without it over (query, gold names);
    `key`: which name a row's gold is ("name", or "tool" lower-cased for MetaTool)."""
    plain = Searcher(searcher.catalog, ranker=searcher.ranker, abstain=False)
    abstained = [False] * len(rows)
    hit = hit_plain = 0
    for i, (query, gold) in enumerate(rows):
        page = searcher.search(query, limit=5)
        names = [_name(r, key) for r in plain.search(query, limit=5).results]
        found = bool(gold.intersection(names))
        hit_plain += found
        abstained[i] = page.abstained
        hit += found and not page.abstained
    n = len(rows) or 1
    tune, held = split(abstained)
    return {"queries": len(rows), "abstained": round(sum(abstained) / n, 3),
            "tuning": round(sum(tune) / (len(tune) or 1), 3),
            "held_apart": round(sum(held) / (len(held) or 1), 3),
            "recall@5": round(hit / n, 3), "recall@5_without": round(hit_plain / n, 3)}


def _name(result: Any, key: str) -> str:
    return str(result.name if key == "name" else result.tool.lower())


def run(root: Path, ranker: Ranker | None = None) -> dict[str, Any]:
    """Every set's abstention rate (and the answerable sets' recall@5), for `ranker`
    (None: lexical)."""
    from byref.bench.search.discovery import metatool_catalog, metatool_data
    from byref.bench.search.retrieval_queries import (
        TASK_QUERIES,
        VOCABULARY_QUERIES,
        read_task_queries,
    )
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    needs = read_unanswerable()
    mcp: Catalog = catalog_from_listings(read_listings(root / "mcp-catalog"))
    descriptions, sample, _ = metatool_data(root)
    metatool = metatool_catalog(descriptions)
    on_mcp, on_metatool = Searcher(mcp, ranker=ranker), Searcher(metatool, ranker=ranker)
    out: dict[str, Any] = {}
    for label, searcher, queries in (
            ("unanswerable_mcp", on_mcp, [q for q, _ in needs]),
            ("unanswerable_metatool", on_metatool, [q for q, w in needs if w == "both"])):
        tune, held = split(queries)
        out[label] = {"queries": len(queries), "tuning": rate(searcher, tune),
                      "held_apart": rate(searcher, held)}
    fresh = read_unanswerable(FRESH)
    for label, searcher, queries in (
            ("unanswerable_fresh_mcp", on_mcp, [q for q, _ in fresh]),
            ("unanswerable_fresh_metatool", on_metatool, [q for q, w in fresh if w == "both"])):
        out[label] = {"queries": len(queries), "tuning": 0.0,
                      "held_apart": rate(searcher, queries)}
    out["metatool"] = answerable(
        on_metatool, [(r["Query"], frozenset({r["Tool"].lower()}))
                      for r in sample[:METATOOL_ROWS]], key="tool")
    out["task"] = answerable(on_mcp, read_task_queries(TASK_QUERIES))
    out["vocabulary"] = answerable(on_mcp, read_task_queries(VOCABULARY_QUERIES))
    return out
