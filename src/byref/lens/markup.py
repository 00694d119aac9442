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

from byref.lens.costs import Turn

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:12px 24px}header a{color:#9cf}
main{padding:16px 24px;max-width:1200px}
h1{font-size:18px;margin:0}h2{font-size:16px;margin:24px 0 8px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px;margin:8px 0}
.gap{border-left:4px solid #d08a00}
table{border-collapse:collapse;background:#fff}td,th{border:1px solid #dde1e8;padding:3px 8px;
text-align:left;vertical-align:top}th{background:#eef1f5}td.n{text-align:right;
font-variant-numeric:tabular-nums}
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
            f"<table>{body}</table></div>")


def gap(text: str) -> str:
    """An HTML card saying something is missing or unreadable."""
    return f'<div class="card gap">{esc(text)}</div>'


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


def chart(turns: Sequence[Turn], measure: str, *, id_: str) -> str:
    """Horizontal bars per turn, visible beside inlined, on a log scale (the two differ by
    orders of magnitude; a linear scale would show the visible side as nothing)."""
    row_h, bar_h, left, width = 34, 12, 230, 520
    values = [getattr(t.inlined, measure) for t in turns] + [getattr(t.visible, measure)
                                                              for t in turns]
    top = max([1, *values])

    def bar_w(v: int) -> float:
        return 0.0 if v <= 0 else max(1.0, width * math.log10(1 + v) / math.log10(1 + top))

    parts = []
    for i, t in enumerate(turns):
        y = 20 + i * row_h
        vis, inl = getattr(t.visible, measure), getattr(t.inlined, measure)
        label = f"seq {t.seq} {t.role}: {t.label}"[:38]
        parts.append(
            f'<g data-seq="{t.seq}"><text x="0" y="{y + 10}">{esc(label)}</text>'
            f'<rect class="visible" x="{left}" y="{y}" width="{bar_w(vis):.1f}" height="{bar_h}" '
            f'fill="#2f6fde"><title>model saw {vis:,} {measure}</title></rect>'
            f'<text x="{left + bar_w(vis) + 4:.1f}" y="{y + 10}">{vis:,}</text>'
            f'<rect class="inlined" x="{left}" y="{y + bar_h + 2}" width="{bar_w(inl):.1f}" '
            f'height="{bar_h}" fill="#b9c0cc"><title>inlined: {inl:,} {measure}</title></rect>'
            f'<text x="{left + bar_w(inl) + 4:.1f}" y="{y + 2 * bar_h + 2}">{inl:,}'
            f"{_times(vis, inl)}</text></g>"
        )
    height = 30 + len(turns) * row_h
    legend = (f'<text x="{left}" y="12"><tspan fill="#2f6fde">■ model-visible</tspan> '
              f'<tspan fill="#8a93a3">■ inlining everything</tspan> ({esc(measure)}, log '
              'scale)</text>')
    return (f'<svg id="{esc(id_)}" role="img" width="{left + width + 260}" height="{height}">'
            f"{legend}{''.join(parts)}</svg>")
