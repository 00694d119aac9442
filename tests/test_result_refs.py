"""The library's side of results by ref: a Session's small results carry a ref line the model can
pass on exactly, the line names where the result landed, and `Blocks` keep their places."""

from __future__ import annotations

import json
from typing import Any

import byref
from byref.dispatch.outbound.reflines import copied, long_ref_line, moved, named, ref_line, split
from byref.testing import last_ref
from byref.tools import Blocks
from byref.transcript import Part

DOC = ('{"price": 1.50, "count": 1e2, "name": "Caf\\u00e9 \\"quoted\\"", "ratio": 2.50, '
       '"big": 12345678901234567890, "tags": ["a", "b/c"], "nested": {"zero": -0.0, '
       '"exp": 1E+2, "pad": "xxxxxxxxxxxxxxxxxxx"}}')


def _session(received: list[Any]) -> byref.Session:
    @byref.tool
    def doc() -> str:
        """A small JSON document."""
        return DOC

    @byref.tool
    def save(text: str) -> str:
        """Keep `text`."""
        received.append(text)
        return f"kept {len(text.encode())} bytes"

    @byref.tool
    def mixed() -> Blocks:
        """A caption, a long block, a caption."""
        return Blocks(("before", "long line\n" * 4000, "after"))

    return byref.Session([doc, save, mixed])


def _ref(content: str) -> dict[str, Any]:
    _, line = split(content)
    assert line is not None, content
    return copied(line)


def test_a_session_result_is_forwarded_by_its_ref_line_byte_identical() -> None:
    assert len(DOC.encode()) == 196
    received: list[Any] = []
    session = _session(received)
    [shown] = session.handle_sync([{"type": "tool_use", "id": "a", "name": "doc", "input": {}}])
    body, line = split(shown["content"])
    assert body == DOC and line == ref_line(1, 0) == "[ref r1]"
    assert _ref(shown["content"]) == {"$ref": "r1"}
    [kept] = session.handle_sync([{"type": "tool_use", "id": "b", "name": "save",
                                   "input": {"text": _ref(shown["content"])}}])
    assert split(kept["content"])[0] == "kept 196 bytes"
    assert received == [DOC]


def test_blocks_are_shown_in_place_and_a_long_one_is_placed_there() -> None:
    received: list[Any] = []
    session = _session(received)
    [shown] = session.handle_sync([{"type": "tool_use", "id": "a", "name": "mixed",
                                    "input": {}}])
    body, _ = split(shown["content"])
    first, placed, last = body.split("\n")
    assert (first, last) == ("before", "after")
    substitute = json.loads(placed)
    assert substitute["placed"] is True and "block 1 of its result" in substitute["note"]
    field = {"$ref": f'{_ref(shown["content"])["$ref"]}.1'}
    session.handle_sync([{"type": "tool_use", "id": "b", "name": "save",
                          "input": {"text": field}}])
    session.handle_sync([{"type": "tool_use", "id": "c", "name": "save",
                          "input": {"text": substitute["value"]}}])
    assert received == ["long line\n" * 4000] * 2


def test_a_moved_line_names_where_the_result_landed() -> None:
    part = Part(type="tool_result", value="x", rendered=f"x\n{ref_line(5, 0)}")
    assert named(moved(part, 9, 0).rendered, 9) == (9, 0)
    assert moved(part, 9, 0).rendered == f"x\n{ref_line(9, 0)}"
    seq = 29_075_061_770
    landed = moved(part, seq, 2)
    assert landed.rendered == "x\n[ref r75061770p2]"
    assert named(landed.rendered, seq + 40) == (seq, 2)
    # A rendering recorded before handles keeps its long line, read as one.
    old = Part(type="tool_result", value="x", rendered=f"x\n{long_ref_line(seq, 1)}")
    assert split(old.rendered or "") == ("x", long_ref_line(seq, 1))
    assert named(old.rendered, 0) == (seq, 1)
    assert copied(long_ref_line(seq, 1)) == {
        "$ref": {"type": "Message", "seq": seq, "part": 1}}
    assert moved(old, 9, 0).rendered == f"x\n{ref_line(9, 0)}"
    plain = Part(type="tool_result", value="x", rendered="x")
    assert moved(plain, 9, 0) is plain  # no line, nothing to move
    # A tool's own text that merely mentions a ref is not a line of ours.
    assert split('see [ref: {"$ref":{"type":"Blob","key":"art_x"}}]')[1] is None


def test_the_scripted_model_reads_the_ref_of_what_it_was_shown() -> None:
    received: list[Any] = []

    @byref.tool
    def doc() -> str:
        """A small JSON document."""
        return DOC

    @byref.tool
    def save(text: str) -> str:
        """Keep `text`."""
        received.append(text)
        return "kept"

    model = byref.testing.ScriptedModel([
        byref.testing.call("doc", {}),
        byref.testing.call("save", lambda r: {"text": last_ref(r)}),
        byref.testing.say("done")])
    byref.Harness(model, [doc, save]).run_sync("copy it")
    assert received == [DOC]
