"""The wants leg: artifact arguments are redeemed before the tool runs, or the tool does not run.

The law: a `wants` argument must redeem to an artifact of the declared kind, in scope, intact. A
wrong kind, a missing or expired ref, a required argument left out (decided by the tool's own
schema, whatever the validation dial says) or a digest mismatch is refused by name, and every
refusal lists up to 10 live refs of the wanted kind (label, size) so the model can fix its call.
"""

from __future__ import annotations

from typing import Any

from byref.errors import RefusalReason, Refused
from byref.refs import Blob, MessageRef, RefRefusal, is_envelope, parse_model_envelope, quote
from byref.resolve import Resolver
from byref.store import ArtifactMeta, ArtifactStore, Scope
from byref.store.port import ArtifactError, ArtifactIntegrityError
from byref.tools.tool import Tool

LIVE_LIMIT = 10


class WantsRefusal(Refused):
    """A `wants` argument could not be resolved: the model-facing text, its reason code, the ref
    and the detail for the trace."""

    def __init__(self, text: str, reason: RefusalReason, ref: str | None, detail: str) -> None:
        super().__init__(text)
        self.text, self.reason, self.ref, self.detail = text, reason, ref, detail


def redeem(
    tool: Tool, args: dict[str, Any], *, store: ArtifactStore, scope: Scope, resolver: Resolver,
    call_seq: int, cap: int,
) -> dict[str, ArtifactMeta]:
    """Replace each wanted argument's ref with its data; answer what each redeemed to."""
    wanted: dict[str, ArtifactMeta] = {}
    for arg, kind in tool.wants.items():
        if arg not in args:
            if arg in tool.required:
                detail = (
                    f"{arg!r} is required and no value was passed; this tool wants a {kind!r} "
                    "artifact there, resolved before the tool runs, so it never runs without it. "
                    f"Pass the art_… ref as {arg!r}."
                )
                raise _refuse(tool, detail, "invalid-input", None, kind, store, scope)
            continue
        key = _key(args[arg], resolver, call_seq, cap)
        if key is None:
            detail = (f"{arg!r} must be the art_… ref of a {kind!r} artifact (a string, or "
                      f'{{"$ref": {{"type": "Blob", "key": "art_…"}}}}), got {quote(args[arg])}.')
            raise _refuse(tool, detail, "invalid-input", None, kind, store, scope)
        try:
            meta = store.head(scope, key)
        except ArtifactError as exc:  # a damaged record: refused by name, never raised
            detail = f"{arg!r} = {key!r} could not be read: its record failed a check ({exc})."
            raise _refuse(tool, detail[:600], "integrity", key, kind, store, scope) from exc
        if meta is None:
            detail = (f"{arg!r} = {key!r} is not available: it is missing, expired, or was never "
                      "stored in this session.")
            raise _refuse(tool, detail, "missing-or-expired", key, kind, store, scope)
        if meta.kind != kind:
            detail = (f"{arg!r} = {key!r} resolves, but it is {meta.kind!r} and this argument "
                      f"wants {kind!r}: the wrong parcel for this argument.")
            raise _refuse(tool, detail, "kind-mismatch", key, kind, store, scope)
        try:
            args[arg] = resolver.value(Blob(key=key))
        except RefRefusal as exc:
            cause = exc.__cause__
            reason: RefusalReason = (
                "integrity" if isinstance(cause, ArtifactIntegrityError) else "missing-or-expired")
            detail = f"{arg!r} = {key!r} could not be read: {exc}"
            raise _refuse(tool, detail, reason, key, kind, store, scope) from exc
        wanted[arg] = meta
    return wanted


def _key(value: Any, resolver: Resolver, call_seq: int, cap: int) -> str | None:
    if isinstance(value, str) and value.startswith("art_"):
        return value if len(value) <= 64 else None
    if not is_envelope(value):
        return None
    try:
        ref = parse_model_envelope(value, cap=cap)
    except RefRefusal:
        return None
    if isinstance(ref, Blob) and ref.key is not None:
        return ref.key
    if isinstance(ref, MessageRef):
        # A Message ref to an opaque marker's `value` (or to a bare ref) names the artifact too.
        try:
            at = ref.at(call_seq)
            assert at.seq is not None
            found = resolver.transcript.field(at.seq, ref.part, ref.field)
        except RefRefusal:
            return None
        return _key(found, resolver, call_seq, cap)
    return None


def live_refs(store: ArtifactStore, scope: Scope, kind: str) -> str:
    """A hint naming the live refs of `kind` in scope (at most `LIVE_LIMIT`), or saying there are
    none or they cannot be listed."""
    try:
        metas = list(store.list(scope, kind, limit=LIVE_LIMIT))
    except ArtifactError:  # the listing is a hint; a store that cannot list loses only that
        return f"The live {kind!r} refs in scope cannot be listed now."
    if not metas:
        return f"No live {kind!r} refs in scope; produce one first with the tool that makes it."
    shown = ", ".join(f"{m.ref} ({m.label!r}, {m.bytes:,} bytes)" for m in metas)
    return f"Live {kind!r} refs in scope: {shown}. Pass one of these."


def _refuse(tool: Tool, detail: str, reason: RefusalReason, ref: str | None, kind: str,
            store: ArtifactStore, scope: Scope) -> WantsRefusal:
    detail = f"{detail} {live_refs(store, scope, kind)}"
    text = (f"Tool {tool.name!r} was not executed: its declared artifact argument did not "
            f"resolve. {detail}")
    return WantsRefusal(text, reason, ref, detail)
