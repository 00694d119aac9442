"""Placement, with its precedence pinned: the tool's ceiling, then placement, then the net.

The law: (1) a tool's own result ceiling is judged first: a longer result is refused, in the
author's words, and never reaches placement; (2) placement stores a rendering above the
auto-insertion limit as `tool-result/<tool>` (or the tool's declared result kind) and shows a
substitute with the ref, kind, true byte count, shape, a bounded preview and one sentence on how
to route it; (3) a last-resort truncation net runs on whatever is left and, with placement on,
should never fire. Errors and refusals are never placed. If the store refuses the put, the result
falls through to the net with a note saying so. A result of several blocks (`Blocks`) is placed
block by block first (`place_blocks`): its largest blocks are stored, each replaced in its place
by its substitute, until the rest fits; only what still does not fit is placed whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from byref.dispatch.outbound.text_preview import text_preview
from byref.dispatch.policy import Policy
from byref.jsonview import bounded, dumps, encode, shape_hint
from byref.refs import Blob, envelope
from byref.store import ArtifactError, ArtifactStore, PutOptions, Scope

PlacementKind = Literal["inline", "ceiling", "placed", "truncated"]
"""How a result reached the model: whole, refused over its ceiling, stored behind a preview,
or cut to the net."""


@dataclass(frozen=True, slots=True)
class Placed:
    """A result settled for the model: the text shown, the value recorded, its ref if stored."""

    text: str
    recorded: Any
    ref: str | None = None
    how: PlacementKind = "inline"


def settle(
    text: str, shown: Any, *, tool: str, ceiling: int | None, result_kind: str | None,
    is_error: bool, policy: Policy, store: ArtifactStore | None, scope: Scope,
    explicit_read: bool = False,
) -> Placed:
    """Decide how a tool's result text reaches the model (inline, previewed, or stored and shown
    as a ref) under `policy` and `ceiling`; returns what is shown and what is recorded."""
    if is_error:
        return _net(text, shown, policy, note=None)
    if ceiling is not None and len(text) > ceiling:
        refusal = (f"Tool {tool!r} produced {len(text):,} characters, over its own limit of "
                   f"{ceiling:,}; ask for less (a narrower query, a filter, a page).")
        return Placed(refusal, refusal, how="ceiling")
    note = None
    threshold = policy.explicit_read_bytes if explicit_read else policy.auto_insert_bytes
    if policy.placement and len(text.encode()) > threshold:
        if store is None:
            note = "placement is on but no artifact store is attached"
        else:
            try:
                return _place(text, shown, tool=tool, kind=result_kind, policy=policy,
                              store=store, scope=scope)
            except ArtifactError as exc:
                note = f"placement failed: {exc}"
    return _net(text, shown, policy, note=note)


PLACE_BLOCK_MIN = 2 * 1024
"""A block shorter than this (bytes) is never placed on its own: its substitute (preview, shape,
ref, note) would be about as long as the block."""


def place_blocks(texts: list[str], shown: list[Any], *, tool: str, result_kind: str | None,
                 policy: Policy, store: ArtifactStore | None, scope: Scope,
                 explicit_read: bool = False) -> dict[int, Placed]:
    """Block index → its placement, for the blocks of a several-block result that must be
    stored (largest first) for the whole rendering to fit the insertion limit; {} when it fits,
    placement is off, or there is no store. A store that refuses a put ends the placing (the
    whole result then meets `settle`)."""
    threshold = policy.explicit_read_bytes if explicit_read else policy.auto_insert_bytes
    sizes = [len(t.encode()) for t in texts]
    total = sum(sizes) + max(0, len(texts) - 1)
    out: dict[int, Placed] = {}
    if not policy.placement or store is None or total <= threshold:
        return out
    for i in sorted(range(len(texts)), key=lambda j: sizes[j], reverse=True):
        if total <= threshold or sizes[i] < PLACE_BLOCK_MIN:
            break
        try:
            placed = _place(texts[i], shown[i], tool=tool, kind=result_kind, policy=policy,
                            store=store, scope=scope, what=f"block {i} of its result")
        except ArtifactError:
            break
        out[i] = placed
        total += len(placed.text.encode()) - sizes[i]
    return out


def _place(text: str, shown: Any, *, tool: str, kind: str | None, policy: Policy,
           store: ArtifactStore, scope: Scope, what: str | None = None) -> Placed:
    structured = not isinstance(shown, str)
    data = encode(shown) if structured else text.encode()
    meta = store.put(scope, data, PutOptions(
        kind=kind or f"tool-result/{tool}",
        media_type="application/json" if structured else "text/plain",
        label=f"{tool} result", digest=True))
    summary: dict[str, Any] = {
        "placed": True,
        "kind": meta.kind,
        "bytes": meta.bytes,
        "shape": shape_hint(shown) if structured else f"text, {len(text):,} chars",
    }
    if structured:
        summary["preview"] = bounded(shown, policy.placed_preview_chars)
    else:
        preview = text_preview(text, policy.placed_preview_chars)
        summary["preview"] = preview.text
        if (how := preview.note()) is not None:
            summary["previewNote"] = how
    reads = ("read_result (records, fields, a range) or read_json / query_json" if structured
             else "read_result (a range of characters) or, if it is JSON, read_json / query_json")
    summary["value"] = envelope(Blob(key=meta.ref))
    stored = "the whole result was stored" if what is None else f"{what} was stored whole"
    summary["note"] = (f"{tool} returned {meta.bytes:,} bytes, too many to insert, so {stored}. "
                       "Pass `value` as-is to any tool argument, or read parts of it with "
                       f"{reads}; do not retype or summarize what you have not read.")
    return Placed(dumps(summary), summary, ref=meta.ref, how="placed")


def _net(text: str, shown: Any, policy: Policy, note: str | None) -> Placed:
    limit = policy.max_result_chars
    if limit is None or len(text) <= limit:
        return Placed(text, shown)
    why = f" ({note})" if note else ""
    tail = (f"\n[byref truncated this result to {limit:,} of {len(text):,} characters{why}; the "
            "rest was not shown.]")
    cut = text[: max(0, limit - len(tail))] + tail
    return Placed(cut, cut, how="truncated")
