"""`byref bench dispatch`: what the pipeline costs per call, against calling the function directly.

Four shapes of call (no refs, one Message ref, one wants argument, one placed result), each timed
through `Dispatcher.dispatch` and as a plain Python call in the same run; the figure that matters
is the ratio, since the machines are shared and noisy.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from byref.dispatch.pipeline import Call, Dispatcher
from byref.dispatch.policy import Policy
from byref.jsonview import encode
from byref.refs import Blob, envelope
from byref.store import MemoryStore, PutOptions, Scope
from byref.tools import BUILTIN_JSON_TOOLS, ToolContext, tool
from byref.transcript import Part, Transcript

ROWS = [{"id": i, "v": i * 3} for i in range(100)]
BIG = [{"id": i, "pad": "x" * 200} for i in range(200)]


@tool
def plain(n: int) -> int:
    """Add one."""
    return n + 1


@tool
def take(rows: list[dict[str, int]]) -> int:
    """Count rows."""
    return len(rows)


@tool(wants={"dataset": "dataset/rows"})
def wanted(dataset: list[dict[str, int]], ctx: ToolContext) -> int:
    """Count a dataset's rows."""
    return len(dataset)


@tool
def big() -> list[dict[str, Any]]:
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


def dispatch_bench(repeat: int = 7, number: int = 300) -> dict[str, Any]:
    store = MemoryStore(retention=None)
    scope = Scope("bench")
    transcript = Transcript()
    transcript.append("tool", [Part(type="tool_result", value={"rows": ROWS})])
    key = store.put(scope, encode(ROWS), PutOptions(kind="dataset/rows",
                                                    media_type="application/json")).ref
    dispatcher = Dispatcher([plain, take, wanted, big], transcript=transcript, store=store,
                            scope=scope, policy=Policy(auto_insert_bytes=24 * 1024))
    cases: dict[str, tuple[Call, Callable[[], Any]]] = {
        "no_refs": (Call("c", "plain", {"n": 1}), lambda: plain.fn(n=1)),
        "one_ref": (Call("c", "take", {"rows": {"$ref": {"type": "Message", "seq": 0, "part": 0,
                                                         "field": "rows"}}}),
                    lambda: take.fn(rows=ROWS)),
        "one_wants": (Call("c", "wanted", {"dataset": key}),
                      lambda: wanted.fn(dataset=ROWS, ctx=None)),
        "one_placement": (Call("c", "big", {}), lambda: big.fn()),
    }
    out: dict[str, Any] = {}
    for name, (call, direct) in cases.items():

        def piped_call(c: Call = call) -> Any:
            return dispatcher.dispatch(c, call_seq=0, seq=1, part=0)

        piped, piped_median = _best(piped_call, repeat,
                                    number if name != "one_placement" else 50)
        base, _ = _best(direct, repeat, number * 10)
        out[name] = {"dispatch_us": round(piped * 1e6, 1),
                     "dispatch_median_us": round(piped_median * 1e6, 1),
                     "direct_us": round(base * 1e6, 3),
                     "ratio": round(piped / max(base, 1e-9), 1),
                     "overhead_us": round((piped - base) * 1e6, 1)}
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
