"""Turning what a tool returned into what is recorded and what the model is shown.

The law: a `Payload` anywhere in a result is streamed into the store and replaced by an opaque
marker (~120 characters whatever its size); a recipe anywhere in a result is recorded as derived
and shown only as a Message ref to its own field; a rendering above the auto-insertion limit is
placed (see placement.py). A `Blocks` result is recorded as the list of its blocks and shown
block after block, one rendering each (`render_blocks`), never as one JSON array.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from byref.dispatch.policy import Policy
from byref.jsonview import dumps
from byref.jsonview.codec import MAX_DEPTH, JsonEncodeError
from byref.media import is_text
from byref.refs import Blob, MessageRef, Ref, envelope, is_recipe
from byref.store import ArtifactStore, PutOptions, Scope
from byref.store.port import CanPutStream
from byref.tools.blocks import Blocks
from byref.tools.payload import Payload


@dataclass
class Shaped:
    """A tool result walked for recording: the value kept, the value shown, and the refs derived
    from its payloads."""
    recorded: Any
    shown: Any
    derived: dict[str, Ref] = field(default_factory=dict)
    minted: list[str] = field(default_factory=list)
    blocks: bool = False
    """The result is `Blocks`: `recorded` and `shown` are lists, one entry a block."""

    def text(self) -> str:
        """What the model is shown of it (a block's rendering per block, or the one rendering)."""
        return render_blocks(self.shown) if self.blocks else render(self.shown)


def shape_result(
    value: Any, *, tool: str, seq: int, part: int, policy: Policy, store: ArtifactStore | None,
    scope: Scope,
) -> Shaped:
    """Walk a tool's return value, storing any `Payload` in the store and replacing it by its
    ref; returns what to record and what to show."""
    out = Shaped(recorded=None, shown=None, blocks=isinstance(value, Blocks))
    if out.blocks:
        value = list(value.items)
    out.recorded, out.shown = _walk(value, (), out, tool=tool, seq=seq, part=part,
                                    policy=policy, store=store, scope=scope)
    return out


def _walk(value: Any, path: tuple[str, ...], out: Shaped, **kw: Any) -> tuple[Any, Any]:
    if len(path) >= MAX_DEPTH and isinstance(value, dict | list | tuple):
        raise JsonEncodeError(f"it is nested more than {MAX_DEPTH} levels deep at "
                              f"{'.'.join(path)[:80]!r}…")
    if isinstance(value, Payload):
        return _payload(value, path, out, **kw)
    if isinstance(value, MessageRef | Blob) or is_recipe(value):
        ref: Ref = value
        dotted = ".".join(path) or ""
        if is_recipe(ref) or not dotted:
            # Recipes never reach the model: it sees a Message ref to this very field.
            out.derived[dotted or "value"] = ref
            shown = envelope(MessageRef(part=kw["part"], seq=kw["seq"], field=dotted or "value"))
            return {"derived": True}, shown
        # A ref inside a result stands for its value: a ref to this field resolves through it.
        out.derived[dotted] = ref
        return envelope(ref), envelope(ref)
    if isinstance(value, dict):
        recorded, shown = {}, {}
        for k, v in value.items():
            recorded[k], shown[k] = _walk(v, (*path, str(k)), out, **kw)
        return recorded, shown
    if isinstance(value, list | tuple):
        pairs = [_walk(v, (*path, str(i)), out, **kw) for i, v in enumerate(value)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return value, value


def _payload(p: Payload, path: tuple[str, ...], out: Shaped, *, tool: str, seq: int, part: int,
             policy: Policy, store: ArtifactStore | None, scope: Scope) -> tuple[Any, Any]:
    if not policy.intercept_payloads or store is None:
        data = b"".join(p.open_chunks())
        if is_text(p.media_type):
            text = data.decode("utf-8", errors="replace")
            return text, text
        inline = {"mediaType": p.media_type, "base64": base64.b64encode(data).decode()}
        return inline, inline
    # A digest by default: every later read verifies it, so same-length damage is caught too.
    options = PutOptions(kind=p.kind or p.media_type, media_type=p.media_type,
                         label=p.label or f"{tool} result", digest=True)
    if isinstance(store, CanPutStream):
        meta = store.put_stream(scope, p.open_chunks(), p.size, options)
    else:
        meta = store.put(scope, b"".join(p.open_chunks()), options)
    out.minted.append(meta.ref)
    # The marker is a stand-in: its `value` (and a marker that is the whole result, the part
    # itself) resolves to the stored bytes, not to the envelope.
    dotted = ".".join(path)
    out.derived[f"{dotted}.value" if dotted else "value"] = Blob(key=meta.ref)
    if not dotted:
        out.derived[""] = Blob(key=meta.ref)
    marker = {"opaque": True, "value": envelope(Blob(key=meta.ref)), "kind": meta.kind,
              "bytes": meta.bytes, "mediaType": meta.media_type}
    return marker, marker


def render(shown: Any) -> str:
    """The text a shown value is sent as: itself if a string, else compact JSON."""
    return shown if isinstance(shown, str) else dumps(shown)


BLOCK_SEPARATOR = "\n"


def render_blocks(shown: list[Any]) -> str:
    """The text of a `Blocks` result: each block's rendering, one after another."""
    return BLOCK_SEPARATOR.join([render(b) for b in shown])
