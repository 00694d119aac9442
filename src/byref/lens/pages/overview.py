"""The run's front page: costs per turn, tool calls with their refs, artifacts, events.

The law: every section states what the run holds, and an empty section says it is empty as a
plain fact (a warning is kept for what is missing or unreadable: a file the run directory lacks,
a value that cannot be measured) instead of vanishing.
"""

from __future__ import annotations

from typing import Any

from byref.jsonview import dumps
from byref.lens.pages.artifacts import known_refs
from byref.lens.pages.markup import card, chart, empty, esc, gap, link, num, path_part, table
from byref.lens.reading.calls import Call, RefUse, calls
from byref.lens.reading.costs import Costs, Moved, Turn, visible_text
from byref.lens.reading.run import Run

REQUEST_CHARS = 200_000
"""The conversation shown under a call is cut here (the page stays loadable); the cut is said."""

SEARCH_EVENTS = ("searched", "activated")
INNER_CHARS = 300
"""Characters of an inner call's input and result shown in a code run's table."""


def overview(run: Run, costs: Costs, *, base: str = "") -> str:
    """The lens's front page: totals, each turn's sizes, and the calls."""
    turns = costs.turns()
    found = calls(run)
    sections = [
        "".join(gap(g) for g in run.gaps),
        _totals(run, turns, costs.moved(found)),
        "".join(gap(f"Inlined size of {ref} unknown, counted as 0: {why}")
                for ref, why in costs.unknown.items()),
        "<h2>Per turn</h2>",
        chart(turns, "chars", id_="chart-chars"),
        chart(turns, "tokens", id_="chart-tokens"),
        _turn_table(turns),
        f"<h2>Tool calls ({len(found)})</h2>",
        "".join(_call(run, c, base) for c in found) or empty("No tool calls in this run."),
        "<h2>Artifacts</h2>",
        _artifacts(run, base, found),
        "<h2>Search → activate</h2>",
        _events(run, SEARCH_EVENTS, "search-events",
                "No search or activation in this run's trace."),
        "<h2>Refusals</h2>",
        _refusals(run, found),
        "<h2>Coverage of reads</h2>",
        _coverage(found),
        "<h2>Trace</h2>",
        _events(run, None, "trace", "The trace is empty."),
    ]
    return "".join(sections)


def _totals(run: Run, turns: list[Turn], moved: Moved) -> str:
    def total(wrote: bool, side: str, measure: str) -> int:
        return sum(getattr(getattr(t, side), measure) for t in turns
                   if (t.role == "assistant") == wrote)

    read = total(False, "visible", "chars")
    rows = [(label, f"{num(total(wrote, 'visible', 'chars'), f'model_{key}_chars')} chars, "
                    f"{num(total(wrote, 'visible', 'tokens'), f'model_{key}_tokens')} tokens")
            for label, wrote, key in (("model read", False, "read"),
                                      ("model wrote", True, "written"))]
    naive = (run.report or {}).get("naive")
    if isinstance(naive, dict) and isinstance(naive.get("model_read_chars"), int):
        rows.append(("naive harness, same task", _naive(run.report or {}, naive)))
    inlined = total(False, "inlined", "chars") + moved.returned.chars
    inlined_tokens = total(False, "inlined", "tokens") + moved.returned.tokens
    rows.append(("this record, refs inlined (estimate)", (
        f"{num(inlined, 'inlined_read_chars')} chars, "
        f"≈{num(inlined_tokens, 'inlined_read_tokens')} tokens read"
        + (esc(f" ({inlined / read:,.1f}× what the model read)") if read else ""))))
    rows.append(("kept out of context (estimate)",
                 f"{num(inlined - read, 'kept_chars')} chars the model did not read"))
    written = sum(t.refs for t in turns)
    named = (total(True, "inlined", "chars") - total(True, "visible", "chars")
             + moved.passed_size.chars)
    rows.append(("passed by ref", (
        f"{num(written + moved.passed, 'passed_refs')} refs"
        + (f" ({written} in the model's calls, {moved.passed} handles its code passed)"
           if moved.passed else " in the model's calls")
        + f", naming {num(named, 'passed_chars')} chars of data it did not retype")))
    rows.append(("how counted", esc(_HOW + (_HOW_NAIVE if naive else _HOW_NO_NAIVE))))
    return card("Totals", rows, id_="totals")


_HOW = ("Model read / wrote: each part's text as the model received or wrote it (the run's "
        "ledger, the figures its command printed). Estimate: this same record with each "
        "result that stood in for stored data counted as that data in full (binary as base64; "
        "tokens counted on a leading sample and scaled). A code run's inner calls count from "
        "its record: each stored value returned to the program as a handle is data the model "
        "did not read, each handle the program passed on a ref passed. ")
_HOW_NAIVE = ("The estimate is not the naive run: a harness without refs makes other calls "
              "(it never calls query_json, and it retypes the rows this run passed by ref), so "
              "the naive figures above are the comparison to quote.")
_HOW_NO_NAIVE = ("This record has no naive run to compare with (only `byref demo` makes one), "
                 "so the estimate is the only comparison: what these same calls would have "
                 "shown the model had nothing been kept out, not what another harness would "
                 "have spent.")


def _naive(report: dict[str, Any], naive: dict[str, Any]) -> str:
    """The naive side as the run's own command printed it, and how it was obtained."""
    read, wrote = naive["model_read_chars"], naive.get("model_written_chars")
    ratio_read, ratio_written = report.get("ratio_read"), report.get("ratio_written")
    text = f"read {num(read, 'naive_read_chars')} chars"
    if isinstance(ratio_read, int | float):
        text += esc(f" ({ratio_read:,.1f}× what the model read here)")
    if isinstance(wrote, int):
        text += f", wrote {num(wrote, 'naive_written_chars')} chars"
        if isinstance(ratio_written, int | float):
            text += esc(f" ({ratio_written:,.1f}×)")
    how = ("measured: the naive harness ran the same task" if naive.get("run") is not False
           else "computed from sizes: the naive harness was not run (it would not fit)")
    return f"{text} <span class=muted>— {esc(how)}</span>"


def _turn_table(turns: list[Turn]) -> str:
    rows = [(str(t.seq), esc(t.role), esc(t.label), num(t.visible.chars), num(t.visible.tokens),
             num(t.inlined.chars), num(t.inlined.tokens)) for t in turns]
    return table(("seq", "role", "parts", "visible chars", "visible tokens",
                  "inlined chars (estimate)", "≈ inlined tokens"), rows, id_="turns")


def _call(run: Run, call: Call, base: str) -> str:
    takes = [(esc(u.path), _ref(u, base), esc(u.origin or "")) for u in call.takes]
    result = call.result
    out = [f'<div class="card call" id="call-{esc(call.call_id)}" data-tool="{esc(call.tool)}">'
           f"<strong>{esc(call.tool)}</strong> <code>{esc(call.call_id)}</code> "
           f'<span class=muted>call at seq {call.seq} part {call.part}</span>']
    out.append("<p>refs taken:</p>" + table(("argument", "ref", "came from"), takes)
               if takes else "<p class=muted>took no refs</p>")
    if result is None:
        out.append("<p class=bad>no result recorded</p>")
    else:
        returns = [(esc(u.path), _ref(u, base), _went(u)) for u in result.returns]
        where = f"seq {result.seq} part {result.part}"
        view = link(f"{base}/result/{result.seq}/{result.part}", "view the value")
        out.append(f"<p>result at {esc(where)}{' (error)' if result.is_error else ''} · {view}"
                   "</p>")
        out.append("<p>refs returned:</p>" + table(("field", "ref", "went to"), returns)
                   if returns else "<p class=muted>returned no refs</p>")
        out.append("<details class=received><summary>the result as the model received it "
                   f"({len(result.rendered):,} chars)</summary><pre>{esc(result.rendered)}</pre>"
                   "</details>")
    out.append(f"<details class=written><summary>the call as the model wrote it "
               f"({len(call.written):,} chars)</summary><pre>{esc(call.written)}</pre></details>")
    out.append(_inner(call, base))
    out.append(_request(run, call))
    out.append("</div>")
    return "".join(out)


def _inner(call: Call, base: str) -> str:
    """A code run's inner calls, from its record: what each took and returned, none of it
    seen by the model unless the program printed it."""
    if call.record is None:
        return ""
    record = link(f"{base}/artifact/{path_part(call.record)}", call.record,
                  data_ref=call.record)
    if call.gap is not None:
        return f"<p class=bad>inner calls not shown: {esc(call.gap)}</p>"
    rows = []
    for inner in call.inner:
        result = inner.result
        took = ", ".join(f"{esc(u.path)} = {_ref(u, base)} <span class=muted>"
                         f"({esc(u.origin or '')})</span>" for u in inner.takes)
        gave = ", ".join(f"{esc(u.path)} = {_ref(u, base)}" for u in result.returns
                         ) if result is not None else ""
        said = ("<span class=bad>no result</span>" if result is None else
                f"{'<span class=bad>refused</span> ' if result.is_error else ''}"
                f"<code>{esc(result.rendered[:INNER_CHARS])}</code>"
                + (f" <span class=muted>… {len(result.rendered):,} chars</span>"
                   if len(result.rendered) > INNER_CHARS else ""))
        rows.append((f"<code>{esc(inner.call_id)}</code>", esc(inner.tool),
                     f"<code>{esc(inner.written[:INNER_CHARS])}</code>", took or "—", said,
                     gave or "—"))
    return (f'<details class=inner open><summary>inner calls from code ({len(rows)}), from its '
            f"record {record}</summary>"
            + table(("call", "tool", "input", "refs taken", "result (the program's, not the "
                     "model's)", "refs returned"), rows, id_=f"inner-{call.call_id}")
            + "</details>")


def _request(run: Run, call: Call) -> str:
    """The messages the model had been sent when it made this call, as recorded."""
    lines: list[str] = []
    for message in run.transcript:
        if message.seq >= call.seq:
            break
        for part in message.parts:
            lines.append(f"[{message.seq} {message.role} {part.type}] "
                         f"{visible_text(message.role, part)}")
    text = "\n".join(lines)
    cut = (f"\n… cut at {REQUEST_CHARS:,} of {len(text):,} chars" if len(text) > REQUEST_CHARS
           else "")
    return ("<details class=request><summary>the request the model received before this call "
            f"({len(text):,} chars of messages)</summary><p class=muted>Messages exactly as "
            "recorded and shown to the model; the system text and tool declarations of that "
            "request are not kept in a run directory.</p>"
            f"<pre>{esc(text[:REQUEST_CHARS])}{esc(cut)}</pre></details>")


def _ref(use: RefUse, base: str) -> str:
    text = f"<code>{esc(use.text)}</code>"
    if use.key:
        text += " " + link(f"{base}/artifact/{path_part(use.key)}", "artifact",
                           data_ref=use.key)
    return text


def _went(use: RefUse) -> str:
    if not use.went_to:
        return "<span class=muted>not used by a later call</span>"
    return ", ".join(link(f"#call-{c}", c) for c in use.went_to)


def _artifacts(run: Run, base: str, calls_: list[Call]) -> str:
    refs = known_refs(run, calls_)
    if not refs:
        return empty("This run names no artifact.")
    rows = []
    for ref in refs:
        found = run.head(ref)
        if found is None:
            rows.append((f"<code>{esc(ref)}</code>", "<span class=muted>absent</span>", "", "",
                         "", ""))
            continue
        meta = found[1]
        rows.append((link(f"{base}/artifact/{path_part(ref)}", ref, data_ref=ref),
                     esc(meta.kind), esc(meta.media_type), num(meta.bytes),
                     esc(meta.label or ""), esc(", ".join(meta.parent_refs) or "—")))
    return table(("ref", "kind", "mediaType", "bytes", "label", "parentRefs"), rows,
                 id_="artifacts")


def _events(run: Run, names: tuple[str, ...] | None, id_: str, nothing: str) -> str:
    picked = [e for e in run.events if names is None or e.get("event") in names]
    if not picked:
        return empty(nothing)
    return table(("event", "details"), ((esc(e.get("event")), _fields(e)) for e in picked),
                 id_=id_)


def _fields(event: dict[str, Any]) -> str:
    # A field an event leaves unset (None) says nothing: it is not shown as `null`.
    return "<br>".join(f"<b>{esc(k)}</b>: <code>{esc(v if isinstance(v, str) else dumps(v))}"
                       "</code>" for k, v in event.items()
                       if k not in ("event", "at") and v is not None)


def _refusals(run: Run, found: list[Call]) -> str:
    refused = [e for e in run.events if e.get("event") == "refused"]
    errors = [c for c in found if c.result is not None and c.result.is_error]
    if not refused and not errors:
        return empty("Nothing was refused in this run.")
    rows = [(esc(e.get("tool") or e.get("op") or ""), esc(e.get("reason") or ""),
             _fields(e)) for e in refused]
    rows += [(esc(c.tool), "what the model was told", f"<pre>{esc(c.result.rendered)}</pre>")
             for c in errors if c.result is not None]
    return table(("tool", "reason", "details"), rows, id_="refusals")


def _coverage(found: list[Call]) -> str:
    rows = [(esc(c.tool), esc(c.call_id), _fields(c.result.coverage))
            for c in found if c.result is not None and c.result.coverage is not None]
    if not rows:
        return empty("No read in this run reported coverage (only explicit reads do).")
    return table(("read", "call", "coverage facts"), rows, id_="coverage")
