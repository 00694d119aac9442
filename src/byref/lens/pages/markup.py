"""HTML building blocks: escaping, the page frame, cards, the per-turn chart (inline SVG).

The law: every value from a run (tool output, model text, artifact bytes) passes through `esc`
before it reaches the page, and the page runs no script (a Content-Security-Policy without
`script-src` says so to the browser), so nothing a tool returned can act in the viewer's page.
Expanding a request uses `<details>`; the chart is server-drawn SVG: no JavaScript at all.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from byref.lens.reading.costs import Turn

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:12px 24px}header a{color:#9cf}
main{padding:16px 24px;max-width:1200px}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:24px 0 8px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px;margin:8px 0;
overflow-x:auto}
.gap{border-left:4px solid #d08a00}.empty{color:#6a7383;background:#fafbfc}
table{border-collapse:collapse;background:#fff;max-width:100%}td,th{border:1px solid #dde1e8;
padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word}
td code,td a{overflow-wrap:anywhere}table.rows td{min-width:6em;overflow-wrap:anywhere}
table.rows td:first-child{min-width:0}
th{background:#eef1f5}table.kv th{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums}
svg{max-width:100%;height:auto}
code,pre{font:12px/1.4 ui-monospace,monospace}pre{white-space:pre-wrap;word-break:break-all;
background:#fff;border:1px solid #dde1e8;padding:8px;max-height:480px;overflow:auto}
.lines{counter-reset:l}.lines span{display:block}.lines span::before{counter-increment:l;
content:counter(l);display:inline-block;width:4em;color:#8a93a3;text-align:right;
margin-right:1em}
.muted{color:#6a7383}.bad{color:#a0281e}
nav.pager a,nav.pager span{margin-right:12px}
svg text{font:11px system-ui,sans-serif}
"""

CSP = ("default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def esc(value: object) -> str:
    """`value` as HTML-escaped text."""
    return html.escape(str(value), quote=True)


def num(value: int, name: str | None = None) -> str:
    """A figure as the page shows it, with its exact value in `data-value` for tests and tools."""
    attr = f' data-figure="{esc(name)}"' if name else ""
    return f'<span class="fig"{attr} data-value="{value}">{value:,}</span>'


def link(href: str, text: str, **attrs: str) -> str:
    """An HTML link to `href` with escaped `text` and attributes."""
    extra = "".join(f' {k.replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


def path_part(text: str) -> str:
    """`text` percent-encoded as one URL path segment."""
    return quote(text, safe="")


def page(title: str, body: str, *, base: str = "") -> str:
    """A whole HTML page with the lens header."""
    home = link(base + "/", "byref lens")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><header><h1>{home} · {esc(title)}</h1></header><main>{body}</main></body></html>"
    )


def card(title: str, rows: Iterable[tuple[str, str]], *, cls: str = "", id_: str = "") -> str:
    """A definition card; values are HTML already (escape them with `esc`)."""
    ident = f' id="{esc(id_)}"' if id_ else ""
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return (f'<div class="card {cls}"{ident}><strong>{esc(title)}</strong>'
            f'<table class="kv">{body}</table></div>')


def gap(text: str) -> str:
    """An HTML card saying something is missing or unreadable (styled as a warning)."""
    return f'<div class="card gap">{esc(text)}</div>'


def empty(text: str) -> str:
    """An HTML card saying a section has nothing in it (a fact, not a warning)."""
    return f'<div class="card empty">{esc(text)}</div>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, id_: str = "") -> str:
    """An HTML table; cells are HTML already, headers are escaped."""
    ident = f' id="{esc(id_)}"' if id_ else ""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _times(visible: int, inlined: int) -> str:
    """The factor a log scale hides, said in words next to the bar."""
    if visible <= 0 or inlined <= visible * 1.05:
        return ""
    return f" ({inlined / visible:,.0f}× what the model saw)"


LABEL_CHARS = 150
"""A chart row's label is shown whole up to here (then "…", with the whole label as its title)."""


def chart(turns: Sequence[Turn], measure: str, *, id_: str) -> str:
    """Horizontal bars per turn, visible beside inlined, on a log scale (the two differ by
    orders of magnitude; a linear scale would show the visible side as nothing). Each turn's
    label has a line of its own above its bars, so no label is cut to fit a column."""
    row_h, bar_h, left, width = 52, 12, 8, 760
    values = [getattr(t.inlined, measure) for t in turns] + [getattr(t.visible, measure)
                                                              for t in turns]
    top = max([1, *values])

    def bar_w(v: int) -> float:
        return 0.0 if v <= 0 else max(1.0, width * math.log10(1 + v) / math.log10(1 + top))

    parts = []
    for i, t in enumerate(turns):
        y = 24 + i * row_h
        vis, inl = getattr(t.visible, measure), getattr(t.inlined, measure)
        whole = f"seq {t.seq} {t.role}: {t.label}"
        label = whole if len(whole) <= LABEL_CHARS else whole[:LABEL_CHARS - 1] + "…"
        bars = y + 15
        parts.append(
            f'<g data-seq="{t.seq}"><text class="label" x="0" y="{y + 10}">{esc(label)}'
            f"<title>{esc(whole)}</title></text>"
            f'<rect class="visible" x="{left}" y="{bars}" width="{bar_w(vis):.1f}" '
            f'height="{bar_h}" fill="#2f6fde"><title>model saw {vis:,} {measure}</title></rect>'
            f'<text x="{left + bar_w(vis) + 4:.1f}" y="{bars + 10}">{vis:,}</text>'
            f'<rect class="inlined" x="{left}" y="{bars + bar_h + 2}" width="{bar_w(inl):.1f}" '
            f'height="{bar_h}" fill="#b9c0cc"><title>inlined: {inl:,} {measure}</title></rect>'
            f'<text x="{left + bar_w(inl) + 4:.1f}" y="{bars + 2 * bar_h + 2}">{inl:,}'
            f"{_times(vis, inl)}</text></g>"
        )
    height = 34 + len(turns) * row_h
    total_w = left + width + 300
    legend = ('<text x="0" y="12"><tspan fill="#2f6fde">■ model-visible</tspan> '
              '<tspan fill="#8a93a3">■ inlined (estimate)</tspan> '
              f"({esc(measure)}, log scale)</text>")
    return (f'<svg id="{esc(id_)}" role="img" width="{total_w}" height="{height}" '
            f'viewBox="0 0 {total_w} {height}">{legend}{"".join(parts)}</svg>')
