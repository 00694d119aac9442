"""`byref bench context --turns N`: a long scripted session under a request budget, measured.

Owns the session (its tools, the kept holdings version it reads, the plan of calls) and the
figures (per turn: request bytes, replaced groups, the share of the request byte-identical to the
previous one). The harness that plays the plan is wired in by the caller (the CLI, the tests),
since this package sits below the harness. The law: figures come from the requests actually sent;
the raw transcript size is measured, not assumed, so "N× the budget" is a measured ratio.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from byref.jsonview import dumps
from byref.reads import ResultVersions
from byref.store import ArtifactStore, Scope
from byref.tools import Tool, tool

BUDGET_BYTES: Final = 64 * 1024
HOLDINGS_ROWS: Final = 4_000
_SECTORS: Final = ("technology", "healthcare", "energy", "financials", "utilities", "materials")
_WORDS: Final = ("allocation", "exposure", "drawdown", "rebalance", "tracking", "liquidity",
                 "duration", "dividend", "volatility", "benchmark", "turnover", "expense")


def holdings(rows: int = HOLDINGS_ROWS) -> list[dict[str, Any]]:
    """A deterministic holdings table (about 140 bytes a row)."""
    return [
        {"fundCode": f"F{i:05d}", "name": f"Fund {i} {_WORDS[i % len(_WORDS)]} index",
         "amount": round(1000 + (i * 7919) % 250_000 / 7, 2), "sector": _SECTORS[i % 6],
         "weight": round(((i * 104_729) % 1000) / 10_000, 4)}
        for i in range(rows)
    ]


@tool(capabilities=("docs.fetch",))
def fetch_doc(n: int, kb: int = 18) -> dict[str, Any]:
    """Fetch research document `n` (about `kb` kilobytes of text)."""
    words = [_WORDS[(n * 31 + i * 7) % len(_WORDS)] for i in range(kb * 1000 // 10)]
    body = " ".join(words)[: kb * 1000]
    return {"doc": n, "title": f"Research note {n}", "chars": len(body), "body": body}


def bench_tools() -> list[Tool]:
    """The tools the context benchmark's scripted run calls."""
    return [fetch_doc]


def prepare(store: ArtifactStore, scope: Scope) -> str:
    """Keep the holdings table as a result version; its art_ key is what the plan reads."""
    version = ResultVersions(store, scope).keep(
        "fetch_holdings", {"account": "demo"}, holdings(), id_field="fundCode",
        label="holdings table")
    return version.ref


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """One tool call the benchmark's script makes: tool name and input."""
    tool: str
    input: dict[str, Any]


def plan(turns: int, holdings_ref: str, *, read_bytes: int = 48_000,
         doc_kb: int = 22) -> list[PlannedCall]:
    """`turns - 1` calls (the last turn answers in text): mostly explicit reads of the holdings
    in pages (bounded by `read_bytes` and the request's room), a document fetched whole every
    eighth turn, and every fifth turn a small lookup."""
    ref = {"$ref": {"type": "Blob", "key": holdings_ref}}
    calls: list[PlannedCall] = []
    offset = 0
    for t in range(max(0, turns - 1)):
        if t % 5 == 4:
            calls.append(PlannedCall("read_result", {"ref": ref, "offset": t, "limit": 3,
                                                     "fields": ["fundCode", "amount"]}))
        elif t % 8 == 1:
            calls.append(PlannedCall("fetch_doc", {"n": t, "kb": doc_kb}))
        else:
            calls.append(PlannedCall("read_result", {"ref": ref, "offset": offset,
                                                     "limit": 400, "max_bytes": read_bytes}))
            offset = (offset + 300) % (HOLDINGS_ROWS - 400)  # pages that always hold rows
    return calls


def wire(request: Any, *, strip_note: bool = False) -> list[bytes]:
    """A request as the provider's cache reads it: one line per tool, the system text, then
    every message block in order. `strip_note` drops the final block (the live-handles note)."""
    raw = dataclasses.asdict(request)
    lines = [b"tool " + dumps(t).encode() for t in raw["tools"]]
    lines.append(b"system " + dumps(raw["system"]).encode())
    for message in raw["messages"]:
        for block in message["content"]:
            lines.append(message["role"].encode() + b" " + dumps(block).encode())
    return lines[:-1] if strip_note else lines


def common_prefix(a: bytes, b: bytes) -> int:
    """The length of the longest common prefix of `a` and `b`, in bytes."""
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # bisect on equality of prefixes: fast on long identical runs
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def figures(requests: Sequence[Any], assembled: Sequence[Any], *, budget: int,
            raw_bytes: int) -> dict[str, Any]:
    """Per-turn figures from the requests actually sent and what assembly did for each."""
    turns: list[dict[str, Any]] = []
    previous: Any = None
    prev_note = False
    for i, (request, done) in enumerate(zip(requests, assembled, strict=True), start=1):
        current = b"".join(wire(request))
        share = 0.0
        prefix_held = None
        if previous is not None:
            share = common_prefix(b"".join(wire(previous)), current) / len(current)
            # Request N without its varying suffix must open request N+1 byte for byte.
            head = b"".join(wire(previous, strip_note=prev_note))
            prefix_held = current.startswith(head)
        turns.append({
            "turn": i, "request_bytes": done.bytes, "replaced_groups": len(done.replaced_groups),
            "new_replacements": len(done.new_groups),
            "identical_prefix_share": round(share, 4), "prefix_held": prefix_held,
        })
        previous, prev_note = request, done.note is not None
    quiet = [t for t in turns[1:] if t["new_replacements"] == 0]
    return {
        "budget_bytes": budget, "turns": len(turns), "raw_transcript_bytes": raw_bytes,
        "raw_vs_budget": round(raw_bytes / budget, 2),
        "max_request_bytes": max(t["request_bytes"] for t in turns),
        "all_fit": all(t["request_bytes"] <= budget for t in turns),
        "turns_without_new_replacement": len(quiet),
        "prefix_held_when_no_new_replacement": all(t["prefix_held"] for t in quiet),
        "mean_identical_share": round(sum(t["identical_prefix_share"] for t in turns[1:])
                                      / max(1, len(turns) - 1), 4),
        "per_turn": turns,
    }
