"""The eval's report: a summary per suite and arm, printed as a table, kept as JSON and drawn as
an HTML page (bars a person can compare: success, tokens in and out, turns, model seconds).

Everything but `timing` (each suite's wall time this run) is a function of the model's turns,
so a replay of a recording reproduces it exactly.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

from byref.eval.scoring import VERDICTS
from byref.harness.tokens import default_counter

COLUMNS = ("tokens_in", "tokens_out", "turns", "model_seconds", "read_chars")


def summarize(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per (suite, group, arm), in the order first met: successes, failures by kind,
    and the mean of each of `COLUMNS` per task."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["suite"], str(row.get("group", "")), row["arm"]), []).append(row)
    out: list[dict[str, Any]] = []
    for (suite, group, arm), members in groups.items():
        n = len(members)
        ok = sum(r["verdict"] == "ok" for r in members)
        failures = {v: c for v in VERDICTS[1:]
                    if (c := sum(r["verdict"] == v for r in members))}
        line: dict[str, Any] = {"suite": suite, "group": group, "arm": arm, "tasks": n,
                                "ok": ok, "success": round(ok / n, 3), "failures": failures}
        for column in COLUMNS:
            line[column] = round(sum(float(r[column]) for r in members) / n, 2)
        out.append(line)
    return out


def build(result: dict[str, Any]) -> dict[str, Any]:
    """The whole report from `run_eval`'s result: model, tokenizer, rows, summary, timing."""
    rows = result["rows"]
    counted = {r.get("counted") for r in rows} - {""}
    tokens = ("provider-reported usage" if counted == {"provider"} else
              f"counted with {default_counter().name}" if counted == {"tokenizer"} else
              "provider-reported where given, else counted with " + default_counter().name)
    return {"model": result["model"], "tokens": tokens, "summary": summarize(rows),
            "rows": rows, "timing": result["timing"]}


def table(report: dict[str, Any]) -> str:
    """The summary as a text table (means per task)."""
    lines = [f"byref eval: {report['model']} (tokens: {report['tokens']}; means per task)",
             f"{'suite':<10}{'slice':<16}{'arm':<8}{'ok':>8}{'tokens in':>12}"
             f"{'tokens out':>12}{'turns':>7}{'model s':>9}{'read chars':>12}  failures"]
    for s in report["summary"]:
        failures = ", ".join(f"{k} {v}" for k, v in s["failures"].items()) or "-"
        lines.append(
            f"{s['suite']:<10}{s['group']:<16}{s['arm']:<8}{s['ok']:>4}/{s['tasks']:<3}"
            f"{s['tokens_in']:>12,.0f}{s['tokens_out']:>12,.0f}{s['turns']:>7.1f}"
            f"{s['model_seconds']:>9.2f}{s['read_chars']:>12,.0f}  {failures}")
    return "\n".join(lines)


def timing_line(report: dict[str, Any]) -> str:
    """Each suite's wall time this run."""
    return "wall time: " + ", ".join(f"{k} {v:,.1f} s" for k, v in report["timing"].items())


_STYLE = """body{font:14px system-ui,sans-serif;margin:2em;color:#1b2733}
table{border-collapse:collapse;margin:.5em 0 2em}
td,th{padding:3px 8px;text-align:right;white-space:nowrap}
th{background:#1f3a5f;color:#fff}td.l,th.l{text-align:left}tr:nth-child(even){background:#eef2f7}
.bar{display:inline-block;height:10px;background:#3b6ea5;vertical-align:middle;margin-right:6px}
.bar.ok{background:#2e8b57}small{color:#5a6b7b}"""


def page(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML page: a table per suite, each figure with a bar
    (tokens on a log scale: they span 10 to 10⁶)."""
    summary = report["summary"]
    peaks = {c: max((float(s[c]) for s in summary), default=0.0) for c in COLUMNS}
    parts = [f"<!doctype html><meta charset=utf-8><title>byref eval</title><style>{_STYLE}"
             f"</style><h1>byref eval: {html.escape(str(report['model']))}</h1>"
             f"<p><small>Tokens: {html.escape(report['tokens'])}. Means per task. "
             f"{html.escape(timing_line(report))}.</small></p>"]
    for suite in dict.fromkeys(s["suite"] for s in summary):
        parts.append(f"<h2>{html.escape(suite)}</h2><table><tr><th class=l>slice</th>"
                     "<th class=l>arm</th><th class=l>success</th><th class=l>tokens in</th>"
                     "<th class=l>tokens out</th><th class=l>turns</th>"
                     "<th class=l>model s</th><th class=l>failures</th></tr>")
        for s in (s for s in summary if s["suite"] == suite):
            failures = ", ".join(f"{k} {v}" for k, v in s["failures"].items()) or "–"
            cells = [_bar(s["success"], 1.0, f"{s['ok']}/{s['tasks']}", ok=True)]
            cells += [_bar(s[c], peaks[c], f"{s[c]:,.0f}", log=True)
                      for c in ("tokens_in", "tokens_out")]
            cells += [_bar(s["turns"], peaks["turns"], f"{s['turns']:.1f}"),
                      _bar(s["model_seconds"], peaks["model_seconds"],
                           f"{s['model_seconds']:.2f}")]
            parts.append(f"<tr><td class=l>{html.escape(s['group'])}</td>"
                         f"<td class=l>{html.escape(s['arm'])}</td>"
                         + "".join(f"<td class=l>{c}</td>" for c in cells)
                         + f"<td class=l>{html.escape(failures)}</td></tr>")
        parts.append("</table>")
    return "".join(parts) + "\n"


def _bar(value: float, peak: float, label: str, *, log: bool = False, ok: bool = False) -> str:
    if log:
        share = math.log10(1 + value) / math.log10(1 + peak) if peak > 0 else 0.0
    else:
        share = value / peak if peak > 0 else 0.0
    width = round(120 * share)
    return f"<span class='bar{' ok' if ok else ''}' style='width:{width}px'></span>{label}"
