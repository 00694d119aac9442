"""`byref bench dispatch`: what the pipeline adds to a tool call, against the same call without it.

Four shapes of call, each a tool doing a small real amount of work: a keyed SQLite lookup (no
refs), a summary of 100 rows passed by Message ref, the same summary of a stored dataset passed
as a `wants` argument, and an export of 45 KB that placement stores. Each is timed through
`Dispatcher.dispatch` and as a bare call in the same run, interleaved: the same function called
with its data inline and its result encoded with `json.dumps`, which is what any harness must do
before the result can reach the model. The figures that matter are the overhead in µs and its
ratio to that bare call (a ratio against a bare Python call, tens of nanoseconds, says nothing).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from collections.abc import Callable
from typing import Any

from byref.dispatch import Call, Dispatcher, Policy
from byref.jsonview import encode
from byref.refs import Blob, envelope
from byref.store import MemoryStore, PutOptions, Scope
from byref.tools import BUILTIN_JSON_TOOLS, ToolContext, tool
from byref.transcript import Part, Transcript

ROWS = [{"id": i, "v": i * 3, "open": i % 7 == 0} for i in range(100)]
BIG = [{"id": i, "pad": "x" * 200} for i in range(200)]

_DB = sqlite3.connect(":memory:", check_same_thread=False)
_DB.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, title TEXT, status TEXT)")
_DB.executemany("INSERT INTO item VALUES (?, ?, ?)",
                [(i, f"item {i}", "open" if i % 7 == 0 else "done") for i in range(1_000)])

WORK = {"no_refs": "sqlite lookup by key", "one_ref": "sum 100 rows, by ref",
        "one_wants": "sum 100 stored rows", "one_placement": "export 45 KB, placed"}
"""What each call's tool does (its bare call gets the same data inline)."""


@tool
def lookup(id: int) -> dict[str, Any]:
    """Fetch one item by id."""
    found = _DB.execute("SELECT id, title, status FROM item WHERE id = ?", (id,)).fetchone()
    return {"id": found[0], "title": found[1], "status": found[2]}


def _summary(rows: list[dict[str, Any]]) -> dict[str, int]:
    return {"rows": len(rows), "total": sum(r["v"] for r in rows),
            "open": sum(1 for r in rows if r["open"])}


@tool
def summarize(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Count, total and open rows."""
    return _summary(rows)


@tool(wants={"dataset": "dataset/rows"})
def summarize_dataset(dataset: list[dict[str, Any]], ctx: ToolContext) -> dict[str, int]:
    """Count, total and open rows of a dataset."""
    return _summary(dataset)


@tool
def export() -> list[dict[str, Any]]:
    """A result over the insertion limit."""
    return BIG


def _best(fn: Callable[[], Any], repeat: int, number: int) -> tuple[float, float]:
    samples: list[float] = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return min(samples), statistics.median(samples)


def _bare(fn: Callable[..., Any], **args: Any) -> Callable[[], str]:
    return lambda: json.dumps(fn(**args))


def dispatch_bench(repeat: int = 7, number: int = 300) -> dict[str, Any]:
    """Per shape: µs through dispatch and bare (`direct_us`), the overhead, their ratio, and the
    characters the model is shown either way."""
    store = MemoryStore(retention=None)
    scope = Scope("bench")
    transcript = Transcript()
    transcript.append("tool", [Part(type="tool_result", value={"rows": ROWS})])
    key = store.put(scope, encode(ROWS), PutOptions(kind="dataset/rows",
                                                    media_type="application/json")).ref
    dispatcher = Dispatcher([lookup, summarize, summarize_dataset, export],
                            transcript=transcript, store=store, scope=scope,
                            policy=Policy(auto_insert_bytes=24 * 1024))
    cases: dict[str, tuple[Call, Callable[[], Any]]] = {
        "no_refs": (Call("c", "lookup", {"id": 42}), _bare(lookup.fn, id=42)),
        "one_ref": (Call("c", "summarize", {"rows": {"$ref": {
            "type": "Message", "seq": 0, "part": 0, "field": "rows"}}}),
            _bare(summarize.fn, rows=ROWS)),
        "one_wants": (Call("c", "summarize_dataset", {"dataset": key}),
                      _bare(summarize_dataset.fn, dataset=ROWS, ctx=None)),
        "one_placement": (Call("c", "export", {}), _bare(export.fn)),
    }
    piped: dict[str, list[float]] = {name: [] for name in cases}
    bare: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):  # interleaved, so drift on a shared machine hits both sides alike
        for name, (call, direct) in cases.items():

            def piped_call(c: Call = call) -> Any:
                return dispatcher.dispatch(c, call_seq=0, seq=1, part=0)

            n = number if name != "one_placement" else max(1, number // 6)
            piped[name].append(_best(piped_call, 1, n)[0])
            bare[name].append(_best(direct, 1, n)[0])
    out: dict[str, Any] = {}
    for name, (call, direct) in cases.items():
        through, base = min(piped[name]), min(bare[name])
        shown = dispatcher.dispatch(call, call_seq=0, seq=1, part=0).rendered
        out[name] = {"work": WORK[name], "chars_shown": len(shown or ""),
                     "direct_chars": len(direct()),
                     "dispatch_us": round(through * 1e6, 1),
                     "dispatch_median_us": round(statistics.median(piped[name]) * 1e6, 1),
                     "direct_us": round(base * 1e6, 2),
                     "overhead_us": round((through - base) * 1e6, 1),
                     "ratio": round(through / max(base, 1e-9), 1)}
    return out


def digest_read_bench(rows: int = 200_000, repeat: int = 3) -> dict[str, Any]:
    """What verifying a recorded digest costs a real streaming read on the dispatch path:
    `query_json` over one stored JSON document, with and without a digest, in the same run."""
    doc = encode({"items": [{"id": i, "status": "open" if i % 7 == 0 else "done",
                             "pad": "x" * 40} for i in range(rows)]})
    store, scope = MemoryStore(retention=None), Scope("bench")
    keys = {digest: store.put(scope, doc, PutOptions(kind="d", media_type="application/json",
                                                     digest=digest)).ref
            for digest in (False, True)}
    dispatcher = Dispatcher(list(BUILTIN_JSON_TOOLS), transcript=Transcript(), store=store,
                            scope=scope)

    def read(key: str) -> None:
        call = Call("c", "query_json", {"source": envelope(Blob(key=key)), "path": "/items",
                                        "filter": [{"field": "status", "eq": "open"}]})
        part = dispatcher.dispatch(call, call_seq=0, seq=1, part=0)
        assert not part.is_error, part.rendered

    plain = verified = float("inf")
    for _ in range(repeat):  # interleaved, so drift on a shared machine hits both alike
        plain = min(plain, _best(lambda: read(keys[False]), 1, 1)[0])
        verified = min(verified, _best(lambda: read(keys[True]), 1, 1)[0])
    mb = len(doc) / 1e6
    return {"bytes": len(doc), "plain_mb_s": round(mb / plain, 1),
            "verified_mb_s": round(mb / verified, 1), "ratio": round(plain / verified, 3)}
