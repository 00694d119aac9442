"""One artifact's page, rendered by kind; never a blank pane.

The law: JSON arrays are a paged table (a document's arrays are reached by JSON Pointer), images
are shown inline, PDFs as a rendered page (pypdfium2, the `lens` extra; without it the card says
so and how to install it), text with line numbers, and anything else as its metadata card naming
what the lens cannot show. Lineage (`parentRefs`, and the run's artifacts that name this one as
a parent) is a card of its own. Bytes are read with `get` only, when the page needs them.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from byref import media
from byref.errors import install_hint
from byref.jsonview import NotJsonError, StaleSelectionError, decode, dumps, query_stream
from byref.lens.pages.markup import card, esc, gap, link, num, path_part
from byref.lens.pages.paged import paged_table
from byref.lens.reading.calls import Call, calls
from byref.lens.reading.run import Run
from byref.media import is_json, is_text
from byref.store import ArtifactMeta, Scope

TEXT_LINES = 2_000
PREVIEW_CHARS = 20_000
INLINE_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Raster formats only: an SVG can carry script, so it is shown as text, never as an image."""
PDF_SCALE = 1.2


def artifact_page(run: Run, ref: str, *, page: int = 1, path: str = "", base: str = "") -> str:
    """The HTML page of artifact `ref`: its record, lineage and a rendering of its bytes."""
    found = run.head(ref)
    if found is None:
        return gap(f"Artifact {ref!r} is absent: missing, expired, or not stored under this "
                   "run's scopes.")
    scope, meta = found
    return (meta_card(meta, scope) + lineage_card(run, meta, base)
            + body(run, meta, page=page, path=path, base=base))


def meta_card(meta: ArtifactMeta, scope: Scope) -> str:
    """The HTML card of an artifact's record."""
    rows = [("ref", f"<code>{esc(meta.ref)}</code>"), ("kind", esc(meta.kind)),
            ("mediaType", esc(meta.media_type)), ("bytes", num(meta.bytes, "bytes")),
            ("label", esc(meta.label or "—")), ("created", esc(_when(meta.created_at))),
            ("expires", esc(_when(meta.expires_at) if meta.expires_at else "never")),
            ("digest", f"<code>{esc(meta.digest or '—')}</code>"), ("scope", esc(scope))]
    if meta.metadata:
        rows.append(("metadata", f"<code>{esc(dumps(meta.metadata))}</code>"))
    return card("Artifact", rows, id_="meta")


def lineage_card(run: Run, meta: ArtifactMeta, base: str) -> str:
    """The HTML card of an artifact's parents and of this run's artifacts derived from it."""
    def named(ref: str) -> str:
        there = run.head(ref)
        if there is None:
            return f"<code>{esc(ref)}</code> <span class=muted>(absent)</span>"
        return link(f"{base}/artifact/{path_part(ref)}", ref) + f" {esc(there[1].kind)}"

    parents = "<br>".join(named(r) for r in meta.parent_refs) or "none (made by a tool, not "\
        "derived from another artifact)"
    children = [r for r in known_refs(run) if (h := run.head(r)) and meta.ref in h[1].parent_refs]
    kids = "<br>".join(named(r) for r in children) or "none in this run"
    return card("Lineage", [("parentRefs", parents), ("children", kids)], id_="lineage")


def body(run: Run, meta: ArtifactMeta, *, page: int, path: str, base: str) -> str:
    """The HTML rendering of an artifact's bytes, chosen by media type."""
    href = f"{base}/artifact/{path_part(meta.ref)}"
    mt = media.base(meta.media_type)
    if mt in INLINE_IMAGES:
        return (f'<div class=card id="render" data-render="image"><img src="{href}/raw" '
                f'alt="{esc(meta.label or meta.ref)}" style="max-width:100%"></div>')
    if mt == "application/pdf":
        return pdf_preview(run, meta, href, page)
    got = run.get(meta.ref)
    if got is None:
        return gap(f"Artifact {meta.ref!r} went absent while the page was drawn.")
    data = got[1]
    if is_json(mt) or meta.kind.endswith("json"):
        return json_body(data, path, page, href)
    if is_text(mt):
        return text_body(data)
    return gap(f"The lens has no renderer for mediaType {meta.media_type!r} (kind "
               f"{meta.kind!r}); the record above is all it shows. {meta.bytes:,} bytes are "
               "stored.")


def json_body(data: bytes, path: str, page: int, href: str) -> str:
    """The HTML rendering of a JSON artifact, or of the items at `path`, one page at a time."""
    try:
        document = decode(data) if not path else None
    except Exception:  # msgspec.DecodeError: say it, show the text instead
        return gap("Stored as JSON but does not parse; shown as text.") + text_body(data)
    if path:
        def items() -> Iterator[Any]:
            yield from query_stream(lambda: io.BytesIO(data), path, (), where="this artifact")

        try:
            return (f'<div class=card id="render" data-render="table"><strong>{esc(path)}'
                    f"</strong>{paged_table(items(), page, f'{href}?path={path_part(path)}&')}"
                    "</div>")
        except (StaleSelectionError, NotJsonError) as exc:
            return gap(str(exc))
    return document_body(document, page, f"{href}?")


def document_body(document: Any, page: int, href: str) -> str:
    """A decoded JSON value as HTML: an array as a paged table, an object as a card whose arrays
    link to their own tables (`href` + `path=`; `href` ends in `?` or `&`), anything else as
    text. Never the raw text of a large document."""
    if isinstance(document, list):
        return (f'<div class=card id="render" data-render="table">'
                f"{paged_table(document, page, href)}</div>")
    if isinstance(document, dict):
        rows = []
        for key, value in document.items():
            if isinstance(value, list):
                cell = link(f"{href}path={path_part('/' + _escape_pointer(key))}",
                            f"array, {len(value):,} items: open as a table", data_pointer=key)
            else:
                text = dumps(value)
                cell = f"<code>{esc(text[:400] + ('…' if len(text) > 400 else ''))}</code>"
            rows.append((key, cell))
        return card("JSON object", rows, id_="render")
    return f'<pre id="render">{esc(dumps(document)[:PREVIEW_CHARS])}</pre>'


def text_body(data: bytes) -> str:
    """The first lines of a text artifact as HTML."""
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    shown = "".join(f"<span>{esc(line)}</span>" for line in lines[:TEXT_LINES])
    more = (f'<p class=muted>first {TEXT_LINES:,} of {len(lines):,} lines</p>'
            if len(lines) > TEXT_LINES else "")
    return f'<pre class="lines" id="render" data-render="text">{shown}</pre>{more}'


def pdf_preview(run: Run, meta: ArtifactMeta, href: str, page: int) -> str:
    """The HTML preview of one page of a PDF artifact, with page links."""
    pages = pdf_pages(run, meta.ref)
    if isinstance(pages, str):
        return gap(pages)
    page = min(max(1, page), pages)
    nav = [f"page {page} of {pages}"]
    if page > 1:
        nav.append(link(f"{href}?page={page - 1}", "← previous"))
    if page < pages:
        nav.append(link(f"{href}?page={page + 1}", "next →"))
    return (f'<div class=card id="render" data-render="pdf"><nav class=pager>'
            f'{" ".join(nav)}</nav><img id="pdf-page" src="{href}/page/{page}.png" '
            f'alt="page {page} of {esc(meta.label or meta.ref)}" style="max-width:100%;'
            'border:1px solid #dde1e8"></div>')


def pdf_pages(run: Run, ref: str) -> int | str:
    """The page count, or the sentence naming why there is no preview."""
    try:
        import pypdfium2  # type: ignore[import-untyped]
    except ImportError:
        return (f"PDF preview needs pypdfium2: {install_hint('lens')}. The record above is "
                "all the lens shows without it.")
    got = run.get(ref)
    if got is None:
        return f"Artifact {ref!r} went absent while the page was drawn."
    try:
        return len(pypdfium2.PdfDocument(got[1]))
    except pypdfium2.PdfiumError as exc:
        return f"The stored PDF does not open ({exc}); the record above is all the lens shows."


def pdf_png(run: Run, ref: str, page: int) -> bytes | None:
    """Page `page` (1-based) rendered to PNG, or None when there is no such page."""
    import pypdfium2

    got = run.get(ref)
    if got is None:
        return None
    document = pypdfium2.PdfDocument(got[1])
    if not 1 <= page <= len(document):
        return None
    image = document[page - 1].render(scale=PDF_SCALE).to_pil()
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def known_refs(run: Run, found: list[Call] | None = None) -> list[str]:
    """Every artifact key this run names: minted events first, then keys in the record, then
    each code run's record and the keys its inner calls took and returned (`found`: the run's
    calls, read here when not given)."""
    seen: dict[str, None] = {}
    for event in run.events:
        ref = event.get("ref")
        if event.get("event") == "minted" and isinstance(ref, str):
            seen.setdefault(ref)
    for message in run.transcript:
        for part in message.parts:
            for stand_in in part.derived.values():
                key = _blob_key(stand_in.to_json())
                if key:
                    seen.setdefault(key)
    for call in calls(run) if found is None else found:
        if call.record is not None:
            seen.setdefault(call.record)
        for inner in call.inner:
            uses = [*inner.takes, *(inner.result.returns if inner.result else [])]
            seen.update((u.key, None) for u in uses if u.key is not None)
    return list(seen)


def _blob_key(raw: Any) -> str | None:
    while isinstance(raw, dict):
        if raw.get("type") == "Blob" and isinstance(raw.get("key"), str):
            return str(raw["key"])
        raw = raw.get("source")
    return None


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _when(at: float | None) -> str:
    if at is None:
        return "—"
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
