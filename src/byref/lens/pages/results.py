"""A recorded result's page: the value it stands for, resolved as the tool that took it saw it.

The law: resolution goes through byref's one resolver over the read-only view, so the rows shown
are the rows a tool given that ref received (a query is streamed from its stored source); a ref
that no longer resolves shows the resolver's own sentence, never an empty table. A stored value
is drawn as its artifact page draws it, and a JSON value as a table or an object card (its
arrays one click away, `?path=`), never as one wall of text.
"""

from __future__ import annotations

from typing import Any

from byref.jsonview import StaleSelectionError, dumps, resolve_pointer
from byref.lens.pages.artifacts import body, document_body
from byref.lens.pages.markup import card, esc, gap, link, path_part
from byref.lens.pages.paged import paged_table
from byref.lens.reading.run import Run
from byref.refs import Blob, JsonQuery, MessageRef, RefRefusal

VALUE_CHARS = 200_000


def result_page(run: Run, seq: int, index: int, field: str | None, *, page: int = 1,
                base: str = "", path: str = "") -> str:
    """The HTML page of one recorded tool result, or of one of its fields."""
    try:
        part = run.transcript.part(seq, index)
    except RefRefusal as exc:
        return gap(str(exc))
    if field is None:
        field = "value" if "value" in part.derived else ""
    stand_in = part.derived.get(field)
    where = f"seq {seq} part {index}" + (f" field {field!r}" if field else "")
    head = card("Result", [
        ("tool", esc(part.tool or "—")), ("call", esc(part.call_id or "—")),
        ("address", esc(where)),
        ("model ref",
         f"<code>{esc(dumps(MessageRef(index, seq, field or None).to_json()))}</code>"),
        ("stands for", f"<code>{esc(dumps(stand_in.to_json()))}</code>" if stand_in
         else "its recorded value (nothing was kept out of context)"),
    ], id_="result")
    resolver = run.resolver(run.scope_of(stand_in) if stand_in is not None else None)
    href = f"{base}/result/{seq}/{index}?field={path_part(field)}&"
    key = _key(stand_in.to_json()) if stand_in is not None else None
    stored = run.head(key) if key is not None and isinstance(stand_in, Blob) else None
    if stored is not None:
        # Stored bytes are drawn as their artifact page draws them (a table, an image, a PDF
        # page), never as one wall of text; its links lead to that page.
        link_to = link(f"{base}/artifact/{path_part(stored[1].ref)}", "its artifact page")
        return (head + f"<p>The stored value, as {link_to} shows it:</p>"
                + body(run, stored[1], page=page, path=path, base=base))
    try:
        if isinstance(stand_in, JsonQuery):
            return head + _rows(paged_table(resolver.iterate(stand_in), page, href))
        value: Any = resolver.value(MessageRef(index, seq, field or None))
        if path:
            value = resolve_pointer(value, path, where=f"the result at {where}")
            href += f"path={path_part(path)}&"
    except (RefRefusal, StaleSelectionError) as exc:
        return head + gap(str(exc))
    if isinstance(value, bytes | bytearray):
        key = _key(stand_in.to_json()) if stand_in is not None else None
        target = link(f"{base}/artifact/{path_part(key)}", "its artifact page") if key else ""
        return head + gap(f"{len(value):,} bytes of binary data.") + target
    if isinstance(value, list | dict):
        return head + document_body(value, page, href)
    text = value if isinstance(value, str) else dumps(value)
    cut = f"\n… {len(text):,} chars in all" if len(text) > VALUE_CHARS else ""
    return head + f'<pre id="render">{esc(text[:VALUE_CHARS])}{esc(cut)}</pre>'


def _rows(table_html: str) -> str:
    return f'<div class=card id="render" data-render="table">{table_html}</div>'


def _key(raw: Any) -> str | None:
    while isinstance(raw, dict):
        if raw.get("type") == "Blob" and isinstance(raw.get("key"), str):
            return str(raw["key"])
        raw = raw.get("source")
    return None
