"""`present`: hand a ref to a screen without the bytes passing through the model.

The law: present calls `head`, never `get`; what it records is a description snapshot (kind,
mediaType, bytes, label) inside the tool result, so a transcript reloaded after the artifact
expired still renders an honest placeholder instead of a blank pane. A miss is a teaching refusal
listing the live refs in scope. `as` is the model's hint to the screen, stored, never validated:
renderer choice belongs to the artifact's kind, stamped by the tool that produced it.
"""

from __future__ import annotations

from typing import Any

from byref.refs import KEY_PATTERN, MODEL_REF_SCHEMA, Blob, MessageRef
from byref.tools.call_context import ToolContext
from byref.tools.tool import Tool, ToolRefusal

PRESENT_TOOL_NAME = "present"

DESCRIPTION = (
    "Show a stored artifact on the user's screen without reading it yourself: its `ref` (art_… "
    "or a $ref), `as` ('table', 'image', 'bar-chart'…), an optional `label`.")
# The parameters are explained once, in the description: property descriptions repeating it
# would cost every turn.
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ref": {"anyOf": [{"type": "string", "pattern": f"^{KEY_PATTERN}$"},
                          MODEL_REF_SCHEMA]},
        "as": {"type": "string"},
        "label": {"type": "string"},
    },
    "required": ["ref", "as"],
    "additionalProperties": False,
}


def _present(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    key = _key(args["ref"], ctx)
    meta = ctx.artifacts.head(key) if key else None
    if meta is None:
        live = ctx.artifacts.list(limit=10)
        listing = ", ".join(f"{m.ref} ({m.kind}, {m.label!r}, {m.bytes:,} bytes)" for m in live)
        ctx.emit("refused", op="present", tool=PRESENT_TOOL_NAME, ref=key,
                 reason="missing-or-expired")
        raise ToolRefusal(
            f"Nothing was presented: {args['ref']!r} is not available (missing, expired, or not "
            "stored in this session). "
            + (f"Live refs in scope: {listing}." if live else "There are no live refs in scope."),
            "missing-or-expired",
        )
    snapshot = {"kind": meta.kind, "mediaType": meta.media_type, "bytes": meta.bytes,
                "label": args.get("label") or meta.label}
    ctx.emit("presented", ref=meta.ref, kind=meta.kind, bytes=meta.bytes, as_=args["as"])
    return {"presented": meta.ref, "as": args["as"], "snapshot": snapshot}


def _key(value: Any, ctx: ToolContext) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Blob) and value.key is not None:
        return value.key
    if isinstance(value, MessageRef):
        last = ctx.transcript.last_seq
        if value.seq is None and last is None:
            raise ToolRefusal("There is nothing to present yet: the conversation is empty.",
                              "bad-ref")
        seq = value.at(last if last is not None else 0).seq
        assert seq is not None
        # A stand-in recorded for that field (a placed result, a marker) names its artifact.
        stand_in = ctx.transcript.part(seq, value.part).derived.get(value.field or "")
        if isinstance(stand_in, Blob) and stand_in.key is not None:
            return stand_in.key
        found = ctx.transcript.field(seq, value.part, value.field)
        return _key(found.get("$ref", {}).get("key") if isinstance(found, dict) else found, ctx)
    return None


def make_present_tool() -> Tool:
    """The present tool: shows an artifact to the user by ref, without its bytes entering the
    model's context."""
    return Tool(
        name=PRESENT_TOOL_NAME,
        description=DESCRIPTION,
        fn=_present, input_schema=_SCHEMA, lazy=frozenset({"ref"}), wants_ctx=True,
        literal=frozenset({"as", "label"}),
        capabilities=("artifacts:present",),
        ref_line=False,  # it shows a stored artifact by the ref it was given: nothing new to pass
    )


def placeholder(snapshot: dict[str, Any], *, live: bool) -> str:
    """What a screen shows from the transcript alone (no store round trip)."""
    label = snapshot.get("label") or "artifact"
    size = _human(int(snapshot.get("bytes", 0)))
    state = "" if live else " — expired; re-run to regenerate"
    return f"{label!r} ({snapshot.get('kind')}, {size}){state}"


def _human(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:,.0f} {unit}"
        n //= 1024
    return f"{n} GB"  # pragma: no cover

