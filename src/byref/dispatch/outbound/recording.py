"""Recording a tool's value: what the transcript keeps, what the model is shown, what is stored.

Owns the stage after execution: payloads streamed into the store and shown as markers, recipes
recorded as derived fields, placement (placement.py) of a rendering too large to insert (block
by block for `Blocks`), the ref line under an inline result (reflines.py), the events for each,
and the check that the part can be written before anything lands. The law: nothing is recorded
half — artifacts minted for a result that cannot be recorded are deleted again. On an event loop
(`arecord`) only the store's work goes to a worker thread.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from byref.dispatch.calls import Call, clip, escaped
from byref.dispatch.outbound.placement import place_blocks, settle
from byref.dispatch.outbound.reflines import with_line
from byref.dispatch.outbound.results import Shaped, render, render_blocks, shape_result
from byref.dispatch.policy import Policy
from byref.events import Emitter
from byref.jsonview import JsonEncodeError
from byref.refs import Blob
from byref.store import ArtifactStore, Scope
from byref.tools.payload import Payload
from byref.tools.tool import Tool
from byref.transcript import Part


@dataclass(frozen=True)
class Recorder:
    """Turns a tool's return value into the transcript part recorded for it, storing payloads and
    oversized results in the store."""
    policy: Policy
    store: ArtifactStore | None
    scope: Scope
    emit: Emitter

    def record(self, tool: Tool, call: Call, value: Any, *, seq: int, part: int) -> Part:
        """The result part for `value`, which will be message `seq`, part `part`."""
        shaped = None
        try:
            shaped = shape_result(value, tool=tool.name, seq=seq, part=part, policy=self.policy,
                                  store=self.store, scope=self.scope)
            text = shaped.text()
        except (JsonEncodeError, TypeError) as exc:
            return self.unrecordable(tool, call, shaped, exc)
        return self.finish(tool, call, shaped, text, seq=seq, part=part)

    async def arecord(self, tool: Tool, call: Call, value: Any, *, seq: int, part: int) -> Part:
        """`record` on the event loop; the store's work (payloads, placement) in a thread."""
        from anyio import to_thread  # the async path's own dependency (see adispatch)

        if _has_payload(value):
            return await to_thread.run_sync(functools.partial(
                self.record, tool, call, value, seq=seq, part=part))
        shaped = None
        try:
            shaped = shape_result(value, tool=tool.name, seq=seq, part=part, policy=self.policy,
                                  store=self.store, scope=self.scope)  # no payload: no store
            text = shaped.text()
        except (JsonEncodeError, TypeError) as exc:
            return self.unrecordable(tool, call, shaped, exc)
        if self._may_place(tool, text):
            return await to_thread.run_sync(functools.partial(
                self.finish, tool, call, shaped, text, seq=seq, part=part))
        return self.finish(tool, call, shaped, text, seq=seq, part=part)

    def _may_place(self, tool: Tool, text: str) -> bool:
        # `settle`'s trigger (placement.py): saying yes too often costs a hop, too rarely would
        # put a store write on the event loop.
        threshold = (self.policy.explicit_read_bytes if tool.explicit_read
                     else self.policy.auto_insert_bytes)
        return (self.policy.placement and self.store is not None
                and len(text.encode()) > threshold)

    def finish(self, tool: Tool, call: Call, shaped: Shaped, text: str, *, seq: int,
               part: int) -> Part:
        """Placement, the ref line, events and the write check for a shaped value rendered as
        `text`, recorded as message `seq`, part `part`."""
        try:
            if shaped.blocks:
                text = self._place_blocks(tool, shaped, text)
            placed = settle(text, shaped.shown, tool=tool.name, ceiling=tool.ceiling,
                            result_kind=tool.result_kind, is_error=False, policy=self.policy,
                            store=self.store, scope=self.scope, explicit_read=tool.explicit_read)
            if placed.how == "placed":
                assert placed.ref is not None
                shaped.minted.append(placed.ref)
                self.emit("placed", tool=tool.name, ref=placed.ref, bytes=len(text.encode()))
            elif placed.how == "truncated":
                self.emit("refused", op="net", tool=tool.name, reason="truncated",
                          bytes=len(text.encode()))
            recorded = shaped.recorded if placed.how == "inline" else placed.recorded
            derived = shaped.derived
            if placed.how == "placed":
                # The substitute stands for the stored result: a ref to the part, or to its
                # `value`, delivers the result itself.
                stored = Blob(key=placed.ref)
                derived = {**derived, "": stored, "value": stored}
            candidate = Part(type="tool_result", value=recorded, rendered=placed.text,
                             tool=tool.name, call_id=call.id, is_error=placed.how == "ceiling",
                             derived=derived)
            if (placed.how == "inline" and self.policy.refs and tool.ref_line
                    and "" not in derived):
                # Whatever the model sees of a result it can pass on: a result that is one
                # stored value (a marker) already shows its ref; a placed one shows `value`.
                candidate = with_line(candidate, seq, part)
            # Encode as the transcript will, so a failure happens before anything lands.
            render(candidate.to_json())
            if placed.how == "ceiling":
                self.emit("refused", op="ceiling", tool=tool.name, call_id=call.id,
                          reason="over-ceiling")
            return candidate
        except (JsonEncodeError, TypeError) as exc:
            return self.unrecordable(tool, call, shaped, exc)

    def _place_blocks(self, tool: Tool, shaped: Shaped, text: str) -> str:
        """Store the blocks of a `Blocks` result that keep it from fitting, each replaced in its
        place by its substitute; the rendering that is left."""
        texts = [render(b) for b in shaped.shown]
        placed = place_blocks(texts, shaped.shown, tool=tool.name, result_kind=tool.result_kind,
                              policy=self.policy, store=self.store, scope=self.scope,
                              explicit_read=tool.explicit_read)
        if not placed:
            return text
        for i, block in placed.items():
            assert block.ref is not None
            shaped.minted.append(block.ref)
            self.emit("placed", tool=tool.name, ref=block.ref, bytes=len(texts[i].encode()))
            shaped.recorded[i] = shaped.shown[i] = block.recorded
            # The block's substitute stands for the stored block (as a placed result's does).
            prefix = f"{i}."
            for key in [k for k in shaped.derived if k == str(i) or k.startswith(prefix)]:
                del shaped.derived[key]
            shaped.derived[str(i)] = Blob(key=block.ref)
        return render_blocks(shaped.shown)

    def unrecordable(self, tool: Tool, call: Call, shaped: Shaped | None,
                     exc: Exception) -> Part:
        """The refusal for a value that cannot be recorded; what it minted is deleted."""
        if self.store is not None and shaped is not None:
            for ref in shaped.minted:
                self.store.delete(self.scope, ref)
        text = (
            f"Tool {tool.name!r} returned a value that cannot be recorded "
            f"({clip(escaped(str(exc)), 400)}); nothing was kept. This is a defect in the "
            "tool, not in your call."
        )
        self.emit("refused", op="record", tool=tool.name, call_id=call.id,
                  reason="unserializable-result")
        return Part(type="tool_result", value=text, rendered=text, tool=tool.name,
                    call_id=call.id, is_error=True, reason="unserializable-result")


def _has_payload(value: Any) -> bool:
    """Whether recording `value` streams bytes into the store (a `Payload` anywhere in it)."""
    if isinstance(value, Payload):
        return True
    stack = [value]
    while stack:  # iteratively: a result nested too deep is refused by shape_result, not here
        item = stack.pop()
        if isinstance(item, Payload):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
