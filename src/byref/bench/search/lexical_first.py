"""The first lexical search a new process answers, against the same process's warm searches and
against bm25s's and tantivy's first and warm searches in that process.

Owns `first_searches` and `engine_firsts` (`byref bench search --lexical`). `first_searches`: for
each size (the real catalog's first tools, grown by renamed copies as `discovery.py`'s `replicate`)
and each path, a new Python process times its first search from the call to the answer, then the p50
of its later searches (warm). Paths: `library` (a `Catalog` and `Searcher.search`) and `gateway`
(the gateway's own toolbox build over the recorded listings, then its search_tools, called at once:
a first call that arrives while the index the build started is still being made waits for it). The
law: what the first call builds or loads on first use (the index, the word tables, stems) is in its
time; interpreter start, imports and making the catalog are not; each figure is the median of
several processes, library and gateway alternating, so a loaded machine slows both alike.
`engine_firsts`: in each new process byref's index and the engines' are built first (not timed
as a search), then each answers its first search (which one goes first turns from process to
process), then the warm p50s, interleaved (`search_baselines.interleaved`); medians over the
processes, with byref's ratios to each engine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

FIRST_QUERY = "create a github issue"
PATHS = ("library", "gateway")
ENGINES = ("byref", "bm25s", "tantivy")
WARM_ROUNDS = 3


def first_searches(root: Path, sizes: Sequence[int] = (100, 10_000),
                   runs: Sequence[int] = (7, 3)) -> dict[str, Any]:
    """Per size and path: the median first-search ms over `runs` new processes, its range,
    and the warm p50 ms (median over the same processes), with first / warm."""
    out: dict[str, Any] = {"query": FIRST_QUERY, "sizes": []}
    for size, count in zip(sizes, runs, strict=True):
        found: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
        for _ in range(count):
            for path in PATHS:
                found[path].append(_child(root, size, path))
        row: dict[str, Any] = {"tools": size, "runs": count}
        for path, results in found.items():
            if any("missing" in r for r in results):
                row[path] = {"missing": next(str(r["missing"]) for r in results if "missing" in r)}
                continue
            firsts = sorted(r["first_ms"] for r in results)
            warm = statistics.median(r["warm_p50_ms"] for r in results)
            first = statistics.median(firsts)
            row[path] = {"first_ms": round(first, 1), "first_min_ms": round(firsts[0], 1),
                         "first_max_ms": round(firsts[-1], 1),
                         "first_cpu_ms": round(statistics.median(
                             r["first_cpu_ms"] for r in results), 1),
                         "warm_p50_ms": round(warm, 2),
                         "first_over_warm": round(first / max(warm, 1e-6), 1)}
        out["sizes"].append(row)
    return out


def engine_firsts(root: Path, sizes: Sequence[int] = (2_565, 10_000),
                  runs: Sequence[int] = (6, 3)) -> dict[str, Any]:
    """Per size: the median over `runs` new processes of each engine's first search and warm
    p50 (ms), and byref's ratios to bm25s and tantivy; `{"missing": hint}` without the
    engines."""
    out: dict[str, Any] = {"query": FIRST_QUERY, "sizes": []}
    for size, count in zip(sizes, runs, strict=True):
        found = [_child(root, size, "engines", lead=i % len(ENGINES)) for i in range(count)]
        if "missing" in found[0]:
            return {"missing": found[0]["missing"]}
        row: dict[str, Any] = {"tools": size, "runs": count, "build_ms": round(
            statistics.median(r["build_ms"] for r in found), 1)}
        for kind in ("first_ms", "warm_p50_ms"):
            row[kind] = {name: round(statistics.median(r[kind][name] for r in found), 3)
                         for name in ENGINES}
            for other in ENGINES[1:]:
                row[f"{kind.removesuffix('_ms')}_over_{other}"] = round(
                    row[kind]["byref"] / max(row[kind][other], 1e-9), 2)
        out["sizes"].append(row)
    return out


def _child(root: Path, size: int, path: str, lead: int = 0) -> dict[str, Any]:
    command = [sys.executable, "-m", "byref.bench.search.lexical_first", "--eval", str(root),
               "--tools", str(size), "--path", path, "--lead", str(lead)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)!r} failed: {done.stderr[-2_000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _timed(search: Callable[[str], Any]) -> dict[str, float]:
    from byref.bench.search.discovery import LATENCY_QUERIES

    start, cpu = time.perf_counter(), time.process_time()
    search(FIRST_QUERY)
    first = (time.perf_counter() - start) * 1e3
    first_cpu = (time.process_time() - cpu) * 1e3
    times = []
    for query in LATENCY_QUERIES:
        start = time.perf_counter()
        search(query)
        times.append((time.perf_counter() - start) * 1e3)
    return {"first_ms": first, "first_cpu_ms": first_cpu, "warm_p50_ms": statistics.median(times)}


def library(root: Path, size: int) -> dict[str, float]:
    """In this process: a catalog of `size` tools, then its first and warm searches."""
    from byref.bench.search.discovery import replicate
    from byref.discovery import Searcher
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings

    catalog = catalog_from_listings(replicate(read_listings(root / "mcp-catalog"), size)[:size])
    searcher = Searcher(catalog)
    return _timed(searcher.search)


def engines(root: Path, size: int, lead: int = 0) -> dict[str, Any]:
    """In this process: byref's index over `size` tools (its build timed) and the engines'
    (`search_baselines.engines`), then each one's first search, `ENGINES[lead]` first, then
    one warm pass and `WARM_ROUNDS` interleaved rounds of the latency queries."""
    from byref.bench.search.discovery import LATENCY_QUERIES, replicate
    from byref.bench.search.search_baselines import engines as engine_runs
    from byref.bench.search.search_baselines import interleaved
    from byref.discovery import Searcher
    from byref.discovery.catalog.mcp import catalog_from_listings, read_listings
    from byref.errors import install_hint

    catalog = catalog_from_listings(replicate(read_listings(root / "mcp-catalog"), size)[:size])
    searcher = Searcher(catalog)
    start = time.perf_counter()
    searcher.catalog.index()
    build_ms = (time.perf_counter() - start) * 1e3
    try:
        runs = engine_runs(searcher)
    except ImportError:
        return {"missing": f"bm25s and tantivy are not installed: {install_hint('bench')}"}
    first: dict[str, float] = {}
    for name in ENGINES[lead:] + ENGINES[:lead]:
        start = time.perf_counter()
        runs[name](FIRST_QUERY)
        first[name] = (time.perf_counter() - start) * 1e3
    for query in LATENCY_QUERIES:
        for run in runs.values():
            run(query)
    times, _ = interleaved(runs, LATENCY_QUERIES, WARM_ROUNDS)
    return {"build_ms": build_ms, "first_ms": first,
            "warm_p50_ms": {name: statistics.median(ts) for name, ts in times.items()}}


def gateway(root: Path, size: int) -> dict[str, Any]:
    """In this process: the gateway's toolbox over `size` recorded tools (search mode), then
    its search_tools' first and warm calls."""
    try:
        import mcp_types as types

        from byref.events import Emitter
        from byref.gateway.catalog.build import build_toolbox
        from byref.gateway.catalog.content import Passed
        from byref.gateway.config.file import parse_config
        from byref.reads import ReadLimits
    except ImportError as exc:
        return {"missing": f"the gateway needs byref[mcp]: {exc}"}
    listings = _listings(root / "mcp-catalog", size)
    tools = {server: [types.Tool.model_validate(t) for t in raw]
             for server, raw in listings.items()}
    config = parse_config({"mcpServers": {name: {"command": "unused"} for name in tools},
                           "byref": {"mode": "search"}})
    box = build_toolbox(config, 1, tools, {}, [], invoke=_unreachable, passed=Passed(),
                        usage=None, emit=Emitter(), errlog=None, read_limits=ReadLimits(),
                        call_tool=_unreachable)
    search_tools = box.scaffolding[0]
    return _timed(lambda query: search_tools.fn(query=query))


def _listings(folder: Path, size: int) -> dict[str, list[dict[str, Any]]]:
    """Server → its recorded tools, the first `size` in file order, grown by renamed copies."""
    files = sorted(folder.glob("*.json"))
    every = [(f.stem, t) for f in files for t in json.loads(f.read_text("utf-8"))["tools"]]
    chosen = list(every[:size])
    copy = 1
    while len(chosen) < size:
        chosen.extend((server, {**t, "name": f"{t['name']}_r{copy}"})
                      for server, t in every[:size - len(chosen)])
        copy += 1
    out: dict[str, list[dict[str, Any]]] = {}
    for server, tool in chosen:
        out.setdefault(server, []).append(tool)
    return out


def _unreachable(*_: Any, **__: Any) -> Any:
    raise RuntimeError("the first-search bench searches and never calls a tool")


def main(argv: Sequence[str] | None = None) -> int:
    """One child run: prints its figures as JSON."""
    parser = argparse.ArgumentParser(prog="python -m byref.bench.search.lexical_first")
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--tools", type=int, required=True)
    parser.add_argument("--path", choices=(*PATHS, "engines"), required=True)
    parser.add_argument("--lead", type=int, default=0,
                        help="engines: which of byref, bm25s, tantivy searches first")
    args = parser.parse_args(argv)
    if args.path == "engines":
        print(json.dumps(engines(args.eval, args.tools, args.lead)))
        return 0
    run = library if args.path == "library" else gateway
    print(json.dumps(run(args.eval, args.tools)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
