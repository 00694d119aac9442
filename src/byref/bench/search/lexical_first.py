"""The first lexical search a new process answers, against the same process's warm searches.

Owns `first_searches` (`byref bench search --lexical`): for each size (the real catalog's first
tools, grown by renamed copies as `discovery.py`'s `replicate`) and each path, a new Python process
times its first search from the call to the answer, then the p50 of its later searches (warm).
Paths: `library` (a `Catalog` and `Searcher.search`) and `gateway` (the gateway's own toolbox
build over the recorded listings, then its search_tools, called at once: a first call that
arrives while the index the build started is still being made waits for it). The law: what
the first call builds or loads on first use (the index, the word tables, stems) is in its time;
interpreter start, imports and making the catalog are not; each figure is the median of
several processes, library and gateway alternating, so a loaded machine slows both alike.
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


def _child(root: Path, size: int, path: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "byref.bench.search.lexical_first", "--eval", str(root),
               "--tools", str(size), "--path", path]
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
    """One child run: prints {"first_ms", "warm_p50_ms"} as JSON."""
    parser = argparse.ArgumentParser(prog="python -m byref.bench.search.lexical_first")
    parser.add_argument("--eval", type=Path, required=True)
    parser.add_argument("--tools", type=int, required=True)
    parser.add_argument("--path", choices=PATHS, required=True)
    args = parser.parse_args(argv)
    run = library if args.path == "library" else gateway
    print(json.dumps(run(args.eval, args.tools)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
