"""`byref bench code-mode`: one code run against sequential tool calls, and an inner call's cost.

The law: one scenario — 40 items of an export, for each a second tool's lookup, a filter (stock
below the quantity ordered), one written report — played by the scripted model twice in one run:
call by call (export, 40 lookups, the report, each a turn) and as one `run_code` program. Each
path's model turns and model-visible characters (every request's system, declarations and
messages, summed; and the last request alone) are printed beside their ratio, and the two
reports must be byte-identical. Then an inner call's overhead: a trivial tool called N times from
one program, less the same program calling it none, per call, against that tool dispatched
directly by the same dispatcher (µs each, and the ratio).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from byref.dispatch import Call
from byref.dispatch.outbound.reflines import split
from byref.harness import Harness, Limits, ScriptedModel, call, say
from byref.harness.loop import request_bytes
from byref.harness.messages import Request
from byref.harness.scripted import Step
from byref.jsonview import decode
from byref.store import MemoryStore
from byref.tools import Tool, ToolContext, tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import CodeRunner, SubprocessRunner

ITEMS = 40
COLUMNS = ("sku", "name", "qty", "stock", "price")

SCENARIO_CODE = """
items = tools.export()
rows = []
for item in items:
    info = tools.lookup(sku=item["sku"])
    if info["stock"] < item["qty"]:
        rows.append({"sku": item["sku"], "name": item["name"], "qty": item["qty"],
                     "stock": info["stock"], "price": info["price"]})
report = tools.write_report(rows=rows)
print(f"{len(rows)} of {len(items)} items are short; report {report['report']}")
"""


def _item(i: int) -> dict[str, Any]:
    return {"sku": f"SKU-{i:04d}", "name": f"part {i} ({'steel' if i % 3 else 'brass'})",
            "qty": (i * 7) % 13 + 1, "warehouse": f"W{i % 4}",
            "notes": f"Item {i}: " + "packed in cartons of twelve, shipped by road. " * 6}


def scenario_tools(reports: list[bytes]) -> list[Tool]:
    """The scenario's three tools; each written report's bytes are appended to `reports`."""

    @tool
    def export() -> list[dict[str, Any]]:
        """Export every item of the catalog (sku, name, qty ordered, warehouse, notes)."""
        return [_item(i) for i in range(ITEMS)]

    @tool
    def lookup(sku: str) -> dict[str, Any]:
        """Look up one item's stock and unit price by its sku."""
        n = int(sku.rsplit("-", 1)[-1])
        return {"sku": sku, "stock": (n * 5) % 11, "price": round(1.25 + n * 0.4, 2),
                "supplier": f"supplier {n % 5}"}

    @tool
    def write_report(ctx: ToolContext, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Write the reorder report (one CSV row per item) and return its ref."""
        lines = [",".join(COLUMNS)] + [",".join(str(r[c]) for c in COLUMNS) for r in rows]
        data = ("\n".join(lines) + "\n").encode()
        reports.append(data)
        meta = ctx.artifacts.put(data, kind="report/csv", media_type="text/csv",
                                 label="reorder report")
        return {"report": meta.ref, "rows": len(rows)}

    return [export, lookup, write_report]


@dataclass(frozen=True, slots=True)
class PathFigures:
    """One path through the scenario: turns, characters the model read, the report."""

    turns: int
    chars: int
    """Model-visible characters of every request, summed."""
    last_request: int
    """Model-visible characters of the last request."""
    report: bytes


def _body(text: str) -> Any:
    return decode(split(text)[0])


def _results(request: Request) -> list[str]:
    return [b.text for m in request.messages for b in m.content if b.type == "tool_result"]


def _sequential_steps() -> list[Step]:
    """The scripted model, call by call: it reads each result from its own context."""
    steps: list[Step] = [call("export", {})]

    def sku(i: int) -> Callable[[Request], dict[str, Any]]:
        return lambda request: {"sku": _body(_results(request)[0])[i]["sku"]}

    for i in range(ITEMS):
        steps.append(call("lookup", sku(i)))

    def report(request: Request) -> dict[str, Any]:
        results = _results(request)
        items = _body(results[0])
        rows = []
        for item, text in zip(items, results[1:1 + ITEMS], strict=True):
            info = _body(text)
            if info["stock"] < item["qty"]:
                rows.append({"sku": item["sku"], "name": item["name"], "qty": item["qty"],
                             "stock": info["stock"], "price": info["price"]})
        return {"rows": rows}

    steps.append(call("write_report", report))
    return steps


def _figures(h: Harness, reports: list[bytes]) -> PathFigures:
    sizes = [request_bytes(r) for r in h.requests]
    if len(reports) != 1:
        raise RuntimeError(f"the scenario wrote {len(reports)} reports, not one")
    return PathFigures(len(h.requests), sum(sizes), sizes[-1], reports[0])


def run_sequential() -> PathFigures:
    """The scenario call by call, each call a model turn."""
    reports: list[bytes] = []
    h = Harness(ScriptedModel([*_sequential_steps(), say("Report written.")]),
                scenario_tools(reports), store=MemoryStore(), limits=Limits(max_steps=ITEMS + 8))
    h.run_sync("Write the reorder report: every item whose stock is below the quantity ordered.")
    return _figures(h, reports)


def run_code_mode(runner: CodeRunner | None = None) -> PathFigures:
    """The scenario as one run_code program."""
    reports: list[bytes] = []
    h = Harness(ScriptedModel([call("run_code", {"code": SCENARIO_CODE}),
                               say("Report written.")]),
                scenario_tools(reports), store=MemoryStore(),
                code_mode=CodeMode(runner=runner))
    h.run_sync("Write the reorder report: every item whose stock is below the quantity ordered.")
    failed = [p for m in h.transcript for p in m.parts if p.type == "tool_result" and p.is_error]
    if failed:
        raise RuntimeError(f"the code run was refused: {failed[0].rendered}")
    return _figures(h, reports)


def inner_call_overhead(calls: int = 200, rounds: int = 3,
                        runner: CodeRunner | None = None) -> dict[str, float]:
    """µs an inner call costs (a program making `calls` calls less one making none, per call)
    against the same tool dispatched directly; medians of `rounds`."""
    @tool
    def ping(n: int) -> int:
        """Return n."""
        return n

    def program(n: int) -> float:
        code = f"for i in range({n}):\n    tools.ping(n=i)\n"
        h = Harness(ScriptedModel([call("run_code", {"code": code}), say("x")]), [ping],
                    store=MemoryStore(), code_mode=CodeMode(runner=runner, max_calls=n + 1))
        started = time.perf_counter()
        h.run_sync("go")
        took = time.perf_counter() - started
        part = [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]
        if part.is_error:
            raise RuntimeError(f"the overhead run was refused: {part.rendered}")
        return took

    h = Harness(ScriptedModel([say("x")]), [ping], store=MemoryStore())
    direct_each: list[float] = []
    inner_each: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(calls):
            h.dispatcher.dispatch(Call(f"c{i}", "ping", {"n": i}), call_seq=0, seq=1, part=0)
        direct_each.append((time.perf_counter() - started) / calls * 1e6)
        empty, full = program(0), program(calls)
        inner_each.append(max(0.0, full - empty) / calls * 1e6)
    direct, inner = statistics.median(direct_each), statistics.median(inner_each)
    return {"calls": calls, "direct_us": round(direct, 1), "inner_us": round(inner, 1),
            "ratio": round(inner / direct, 1) if direct else 0.0}


def bench_code_mode(calls: int = 200, rounds: int = 3) -> dict[str, Any]:
    """Both paths through the scenario and the inner-call overhead, as one report."""
    runner = SubprocessRunner()
    sequential, code = run_sequential(), run_code_mode(runner)
    return {
        "items": ITEMS,
        "sequential": {"turns": sequential.turns, "chars": sequential.chars,
                       "last_request": sequential.last_request},
        "code": {"turns": code.turns, "chars": code.chars, "last_request": code.last_request},
        "report_identical": sequential.report == code.report,
        "report_bytes": len(code.report),
        "overhead": inner_call_overhead(calls, rounds, runner),
    }


def format_report(report: dict[str, Any]) -> str:
    """The figures as the CLI prints them."""
    s, c, o = report["sequential"], report["code"], report["overhead"]
    same = "byte-identical" if report["report_identical"] else "DIFFERENT"
    return "\n".join([
        f"scenario: {report['items']} items, a lookup each, a filter, one report "
        f"({report['report_bytes']:,} bytes, {same} on both paths)",
        f"  call by call : {s['turns']:>3} model turns, {s['chars']:>10,} characters read "
        f"(last request {s['last_request']:,})",
        f"  one code run : {c['turns']:>3} model turns, {c['chars']:>10,} characters read "
        f"(last request {c['last_request']:,})",
        f"  ratio        : {s['turns'] / c['turns']:.1f}x fewer turns, "
        f"{s['chars'] / c['chars']:.1f}x fewer characters",
        f"inner call overhead ({o['calls']} calls): {o['inner_us']:,.0f} us each from code vs "
        f"{o['direct_us']:,.0f} us dispatched directly ({o['ratio']}x)",
    ])
