"""The live-handles note: after compaction, what is still readable, rebuilt from facts.

Owns the note request assembly appends once any result has been replaced. The law: the note is
rebuilt every turn by the harness from the store's metadata (`list`, never `get`) and the set of
replaced results, never from a model-written summary; each line names a handle with its kind,
size and label; the note fits its byte cap and says how many handles it left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from byref.jsonview import dumps
from byref.reads import ResultCatalog, fit_lines
from byref.refs import MessageRef, envelope
from byref.store import ArtifactStore, Scope
from byref.transcript import Message

NOTE_HEAD: Final = (
    "[byref] Earlier tool results were moved out of this request to fit its budget. These "
    "handles are still readable exactly (pass one as the ref to read_result); an entry means "
    "the material exists, not that you have read it:"
)


def live_handles_note(
    messages: Sequence[Message], replaced: Sequence[tuple[int, int]], *,
    store: ArtifactStore | None, scope: Scope | None, max_bytes: int,
) -> str:
    """The note: stored artifacts in scope (newest first), then the replaced results."""
    lines: list[str] = []
    if store is not None and scope is not None:
        for entry in ResultCatalog(store, scope).entries(limit=100):
            item = {"ref": {"$ref": {"type": "Blob", "key": entry.ref}}, "kind": entry.kind,
                    "bytes": entry.bytes, "label": entry.label}
            if entry.row_count is not None:
                item["rows"] = entry.row_count
            lines.append(dumps(item))
    by_seq = {m.seq: m for m in messages}
    for seq, index in reversed(replaced):
        part = by_seq[seq].parts[index]
        lines.append(dumps({
            "ref": envelope(MessageRef(part=index, seq=seq)), "kind": f"result of {part.tool}",
            "bytes": len((part.rendered or "").encode()), "label": _label(part.tool, seq),
        }))
    return fit_lines(NOTE_HEAD, lines, max_bytes, what="handles")


def _label(tool: str | None, seq: int) -> str:
    return f"{tool or 'tool'} result, message {seq}"
