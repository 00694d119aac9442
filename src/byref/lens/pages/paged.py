"""A JSON array as a paged table: one page of rows rendered, every row counted.

The law: items arrive as an iterator (streamed from stored bytes where they can be), the page's
rows are kept and the rest only counted, so a page costs one pass and the memory of one page;
the total shown is the number of items actually seen, never an estimate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from byref.jsonview import dumps
from byref.lens.pages.markup import esc, link, num

PAGE_ROWS = 50
CELL_CHARS = 240


def paged_table(items: Iterable[Any], page: int, href: str) -> str:
    """`href` is the page's URL without `page`; it must already end in `?` or `&`."""
    page = max(1, page)
    start = (page - 1) * PAGE_ROWS
    rows: list[Any] = []
    total = 0
    for n, item in enumerate(items):
        total = n + 1
        if start <= n < start + PAGE_ROWS:
            rows.append(item)
    columns: list[str] = []
    for row in rows:
        if isinstance(row, dict):
            columns.extend(k for k in row if k not in columns)
    head = "<th>#</th>" + "".join(f"<th>{esc(c)}</th>" for c in columns or ["value"])
    body = []
    for offset, row in enumerate(rows):
        cells = ([_cell(row.get(c, "")) if isinstance(row, dict) else "" for c in columns]
                 if columns else [_cell(row)])
        body.append(f'<tr data-row="{start + offset}"><td class=n>{start + offset + 1}</td>'
                    + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    last = max(1, -(-total // PAGE_ROWS))
    nav = [f"<span>rows {start + 1 if rows else 0:,}–{start + len(rows):,} of "
           f"{num(total, 'rows-total')}, page {page} of {last}</span>"]
    if page > 1:
        nav.append(link(f"{href}page={page - 1}", "← previous", id="prev-page"))
    if page < last:
        nav.append(link(f"{href}page={page + 1}", "next →", id="next-page"))
    pager = f'<nav class="pager">{"".join(nav)}</nav>'
    return (f'{pager}<table class="rows" data-page="{page}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>{pager}')


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    if len(text) > CELL_CHARS:
        text = text[:CELL_CHARS] + f"… [{len(text):,} chars]"
    return esc(text)
