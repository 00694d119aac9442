"""Trust: every ref delivers exactly what it names, or the tool does not run and the model is
told why in bounded words. Each test here pins one defect the adversarial probes found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from byref.dispatch import Call, Dispatcher, Policy
from byref.dispatch.pipeline import REFUSAL_MAX
from byref.events import Emitter, MemorySink
from byref.refs import Blob, MessageRef, envelope
from byref.store import ArtifactStore, FileStore, MemoryStore, Scope
from byref.testing import result_text
from byref.tools import BUILTIN_JSON_TOOLS, Payload, Tool, tool
from byref.transcript import Part, Transcript, TranscriptLookupError, fresh_origin

ROWS = [{"id": i, "pad": "x" * 60} for i in range(600)]  # ~45 KB: placed
DOC = {"items": [{"id": i, "status": "open" if i % 2 else "done"} for i in range(6)],
       "total": 100}


class Rig:
    """A dispatcher whose calls and results are recorded as the harness and gateway do."""

    def __init__(self, store: ArtifactStore | None = None, *, origin: int = 0) -> None:
        self.received: list[Any] = []
        self.sink = MemorySink()
        self.emit = Emitter(self.sink)
        self.transcript = Transcript(origin=origin)
        self.store = store if store is not None else MemoryStore()
        self.scope = Scope("trust")
        received = self.received

        @tool
        def echo(x: Any) -> str:
            """Receive anything."""
            received.append(x)
            return "ok"

        @tool
        def big() -> list[dict[str, Any]]:
            """A result large enough to be placed."""
            return ROWS

        @tool
        def export() -> Payload:
            """A JSON payload (intercepted, shown as an opaque marker)."""
            return Payload.from_bytes(msgspec.json.encode(DOC), "application/json",
                                      kind="export")

        @tool
        def nested() -> dict[str, Any]:
            """A result carrying a ref to stored bytes."""
            return {"data": Blob(key=self.placed_key), "n": 1}

        @tool
        def text() -> str:
            """JSON-shaped text, to be kept byte for byte."""
            return '{\n  "price": 1.50,\n  "n": 1e2,\n  "k": 1, "k": 2\n}'

        @tool
        def surrogate() -> list[str]:
            """A file name decoded with os.fsdecode from non-UTF-8 bytes."""
            return ["ok.txt", "bad\udcff.txt"]

        @tool
        def hugeint() -> int:
            """An integer past Python's str conversion limit."""
            return 10 ** 5_000

        self.placed_key = ""
        self.dispatcher = Dispatcher(
            [echo, big, export, nested, text, surrogate, hugeint, *BUILTIN_JSON_TOOLS],
            transcript=self.transcript, store=self.store, scope=self.scope, emit=self.emit,
            policy=Policy(auto_insert_bytes=24_000))

    def call(self, name: str, args: Any) -> tuple[int, Part]:
        """Record the call, dispatch it, record the result; answer (result seq, result part)."""
        c = Call(f"c{len(self.transcript)}", name, args)
        call_seq = self.transcript.append("assistant", [self.dispatcher.call_part(c)]).seq
        part = self.dispatcher.dispatch(c, call_seq=call_seq, seq=call_seq + 1, part=0)
        self.transcript.append("tool", [part])  # raises if the part could not be recorded
        return call_seq + 1, part


def msg(seq: int, field: str | None = None) -> dict[str, Any]:
    return envelope(MessageRef(part=0, seq=seq, field=field))


def text_of(part: Part) -> str:
    return result_text(part)  # what the model is shown of the result, its ref line aside


# -- defect 4: valid Message refs deliver the value whose preview the model saw ---------------
def test_a_ref_to_a_placed_results_value_or_part_delivers_the_result() -> None:
    rig = Rig()
    seq, part = rig.call("big", {})
    assert msgspec.json.decode(text_of(part))["placed"] is True
    for ref in (msg(seq, "value"), msg(seq)):
        _, out = rig.call("echo", {"x": ref})
        assert not out.is_error, text_of(out)
    assert rig.received == [ROWS, ROWS]
    _, out = rig.call("echo", {"x": msg(seq, "value.3.id")})
    assert rig.received[-1] == 3


def test_a_ref_to_an_opaque_markers_value_delivers_the_data_not_the_envelope() -> None:
    rig = Rig()
    seq, part = rig.call("export", {})
    assert msgspec.json.decode(text_of(part))["opaque"] is True
    rig.call("echo", {"x": msg(seq, "value")})
    rig.call("echo", {"x": msg(seq)})
    assert rig.received == [DOC, DOC]


def test_a_ref_to_a_whole_read_json_result_delivers_values_not_placeholders() -> None:
    rig = Rig()
    seq, _ = rig.call("export", {})
    read_seq, read = rig.call("read_json", {"source": msg(seq, "value"), "path": "/items"})
    assert not read.is_error, text_of(read)
    rig.call("echo", {"x": msg(read_seq)})
    whole = rig.received[-1]
    assert whole["value"] == DOC["items"] and {"derived": True} not in whole.values()
    rig.call("echo", {"x": msg(read_seq, "value")})
    assert rig.received[-1] == DOC["items"]


def test_a_ref_a_tool_returned_inside_its_result_resolves_to_what_it_names() -> None:
    rig = Rig()
    _, part = rig.call("big", {})
    rig.placed_key = msgspec.json.decode(text_of(part))["value"]["$ref"]["key"]
    nested_seq, _ = rig.call("nested", {})
    rig.call("echo", {"x": msg(nested_seq, "data")})
    assert rig.received == [ROWS]


def test_text_is_kept_exact_and_parsed_as_json_only_on_demand() -> None:
    rig = Rig()
    seq, part = rig.call("text", {})
    original = '{\n  "price": 1.50,\n  "n": 1e2,\n  "k": 1, "k": 2\n}'
    assert text_of(part) == original
    rig.call("echo", {"x": msg(seq)})
    assert rig.received == [original]
    _, read = rig.call("read_json", {"source": msg(seq), "path": "/price"})
    assert not read.is_error and msgspec.json.decode(text_of(read))["preview"] == 1.5


# -- defect 5: nothing a model writes or a tool returns raises out of dispatch ----------------
@pytest.mark.parametrize("bad", ["a\udc80b", {"k\ud800": 1}, 10 ** 5_000, [1, 10 ** 4_400]],
                         ids=["surrogate", "surrogate-key", "huge-int", "nested-huge-int"])
def test_unrecordable_model_input_is_refused_and_the_transcript_stays_whole(bad: Any) -> None:
    rig = Rig()
    _, part = rig.call("echo", {"x": bad})
    assert part.is_error and rig.received == []
    assert "did not run" in text_of(part) and len(text_of(part)) < REFUSAL_MAX
    assert "lone surrogate" in text_of(part) or "digits" in text_of(part)
    assert len(rig.transcript) == 2  # the call and its refusal were both recorded


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("leaf", ["fine", "a\udc80b"], ids=["text", "surrogate"])
def test_input_nested_past_the_limit_is_refused_not_raised(depth: int, leaf: Any) -> None:
    """Encoders recurse: a model's 100,000-deep argument is a refusal naming the limit, and the
    call is still recorded (its too-deep part as a note)."""
    rig = Rig()
    _, part = rig.call("echo", {"x": _nested(depth, leaf)})
    assert part.is_error and rig.received == []
    assert text_of(part).startswith("Tool 'echo' did not run: the input at 'x.0.0.0.")
    assert "is nested more than 256 levels deep, too deep to record." in text_of(part)
    assert len(text_of(part)) < REFUSAL_MAX
    assert len(rig.transcript) == 2


def test_input_nested_within_the_limit_reaches_the_tool() -> None:
    rig = Rig()
    _, part = rig.call("echo", {"x": _nested(200, "fine")})
    assert not part.is_error and rig.received == [_nested(200, "fine")]


@pytest.mark.parametrize("depth", [300, 100_000])
def test_a_result_nested_past_the_limit_is_refused_not_raised(depth: int) -> None:
    for fn in (lambda: _nested(depth, 1), _async_nested(depth)):
        rig = Rig()
        rig.dispatcher.tools["deep"] = Tool(name="deep", description="Deep.", fn=fn,
                                            input_schema={"type": "object"})
        _, part = rig.call("deep", {})
        assert part.is_error
        assert text_of(part).startswith(
            "Tool 'deep' returned a value that cannot be recorded (it is nested more than 256 "
            "levels deep at '0.0.0.0.")
        assert len(text_of(part)) < REFUSAL_MAX


def _async_nested(depth: int) -> Any:
    async def fn() -> Any:
        return _nested(depth, 1)
    return fn


@pytest.mark.parametrize("name", ["surrogate", "hugeint"])
def test_an_unrecordable_tool_result_is_a_refusal(name: str) -> None:
    rig = Rig()
    _, part = rig.call(name, {})
    assert part.is_error and "cannot be recorded" in text_of(part)
    assert len(text_of(part)) < REFUSAL_MAX


def test_a_surrogate_in_a_tool_name_is_refused_not_raised() -> None:
    rig = Rig()
    _, part = rig.call("ec\udc80ho", {})
    assert part.is_error and "lone surrogate" in text_of(part)


@pytest.mark.parametrize("segment", ["²", "٣", "３", "𝟑", "3" * 5_000],
                         ids=["superscript", "arabic-indic", "fullwidth", "math", "5000-digits"])
def test_only_ascii_digits_index_arrays(segment: str) -> None:
    rig = Rig()
    rig.call("echo", {"x": 1})
    rows_seq, _ = rig.call("export", {})
    _, out = rig.call("echo", {"x": msg(rows_seq, f"value.items.{segment}")})
    assert out.is_error and rig.received == [1], text_of(out)
    assert len(text_of(out)) < REFUSAL_MAX
    _, ok = rig.call("echo", {"x": msg(rows_seq, "value.items.3")})
    assert not ok.is_error and rig.received[-1] == DOC["items"][3]


def _record_file(root: Path, ref: str) -> Path:
    return next(root.rglob(f"{ref}.json"))


def test_a_damaged_artifact_record_is_a_refusal(tmp_path: Path) -> None:
    rig = Rig(FileStore(tmp_path))
    seq, part = rig.call("big", {})
    key = msgspec.json.decode(text_of(part))["value"]["$ref"]["key"]
    _record_file(tmp_path, key).write_bytes(b"{not a record")
    for args in ({"x": msg(seq, "value")}, {"x": envelope(Blob(key=key))}):
        _, out = rig.call("echo", args)
        assert out.is_error and rig.received == [], text_of(out)
    _, out = rig.call("read_json", {"source": envelope(Blob(key=key))})
    assert out.is_error and "integrity" in text_of(out)


# -- defect 6: refusals quote at most ~100 characters, with the true length -------------------
@pytest.mark.parametrize("args", [
    {"x": {"$ref": {"type": "Blob", "key": "art_" + "k" * 1_000_000}}},
    {"x": {"$ref": {"type": "Message", "seq": 1, "part": 0, "field": "f" * 1_000_000}}},
    {"x": {"$ref": {"type": "B" * 1_000_000}}},
    {"x": {"$ref": {"type": "Message", "part": 10 ** 5_000}}},
], ids=["key", "field", "type", "part"])
def test_refusals_are_bounded_whatever_they_quote(args: Any) -> None:
    rig = Rig()
    rig.call("echo", {"x": 1})
    _, out = rig.call("echo", args)
    assert out.is_error and len(text_of(out)) < REFUSAL_MAX, len(text_of(out))
    assert "characters" in text_of(out) or "digits" in text_of(out)


@pytest.mark.parametrize("tool", ["read_json", "echo"])  # a lazy parameter, and an eager one
@pytest.mark.parametrize("index", ["seq", "part"])
def test_a_thousand_digit_index_is_refused_saying_what_would_fit(tool: str, index: str) -> None:
    rig = Rig()
    rig.call("echo", {"x": 1})
    body = {"type": "Message", "seq": 1, "part": 0, index: int("9" * 4_001)}
    arg = "source" if tool == "read_json" else "x"
    _, out = rig.call(tool, {arg: {"$ref": body}})
    assert out.is_error and rig.received == [1]
    assert (f"{index!r} must be a non-negative integer of at most 9,007,199,254,740,991, got an "
            "integer of 4,001 digits. Copy the seq and part from the result you mean (each "
            "result names its own), or leave 'seq' out for the current turn.") in text_of(out)
    assert len(text_of(out)) < 400


def test_an_unknown_tool_name_of_a_megabyte_is_quoted_briefly() -> None:
    rig = Rig()
    _, out = rig.call("x" * 1_000_000, {})
    assert out.is_error and len(text_of(out)) < REFUSAL_MAX
    assert "(1,000,000 characters)" in text_of(out)


# -- defect 7: almost-envelopes are refused with the valid form --------------------------------
BODY = {"type": "Message", "seq": 0, "part": 0}


@pytest.mark.parametrize("value", [
    {"$ref": BODY, "note": 1},
    {"$rеf": BODY},  # Cyrillic е
    {"＄ref": BODY},  # fullwidth dollar
    {"$REF": BODY},
    {"$Ref": BODY, "x": 2},
])
def test_almost_envelopes_are_refused_with_the_valid_form(value: dict[str, Any]) -> None:
    rig = Rig()
    _, out = rig.call("echo", {"x": value})
    assert out.is_error and rig.received == []
    assert "almost a reference" in text_of(out) and '{"$ref": {"type": "Message"' in text_of(out)
    assert '{"$ref": "r<digits>"}' in text_of(out)
    _, whole = rig.call("echo", value)
    assert whole.is_error and "the input is almost a reference" in text_of(whole)


@pytest.mark.parametrize("key", [" $ref", "$ref ", "\u200b$ref", "$ref\x00", "$ref\n",
                                 "\t$Ref\r\n", "$r\u200de f", "$re\u0301f", "\u2060＄REF\ufe0f"])
def test_padded_look_alike_envelopes_are_refused_with_the_valid_form(key: str) -> None:
    rig = Rig()
    _, out = rig.call("echo", {"x": {key: BODY}})
    assert out.is_error and rig.received == []
    assert (f"argument 'x' is almost a reference, but not quite. It has the key {key!r}, which "
            'looks like \'$ref\' but is not it. Write {"$ref": "r<digits>"} with the handle '
            'of a result\'s ref line, {"$ref": {"type": "Message"') in text_of(out)
    _, whole = rig.call("echo", {key: BODY})
    assert whole.is_error and "the input is almost a reference" in text_of(whole)
    assert rig.received == []


@pytest.mark.parametrize("value", [
    {"$ref": "#/definitions/x", "description": "JSON Schema's $ref holds a string"},
    {"outer": {"$ref": BODY, "note": 1}},  # nested below the top level: data
    {"ref": BODY},
])
def test_objects_that_are_not_references_pass_as_data(value: dict[str, Any]) -> None:
    rig = Rig()
    _, out = rig.call("echo", {"x": value})
    assert not out.is_error, text_of(out)
    assert rig.received == [value]


# -- defect 3 (dispatch side): placed results and payloads record a digest ---------------------
def test_placed_results_and_payloads_record_a_sha256(tmp_path: Path) -> None:
    rig = Rig(FileStore(tmp_path))
    _, placed = rig.call("big", {})
    _, marker = rig.call("export", {})
    for part in (placed, marker):
        key = msgspec.json.decode(text_of(part))["value"]["$ref"]["key"]
        meta = rig.store.head(rig.scope, key)
        assert meta is not None and (meta.digest or "").startswith("sha256:")


def _tamper(root: Path, key: str, old: bytes, new: bytes) -> None:
    path = next(root.rglob(f"{key}.bin"))
    data = path.read_bytes()
    assert old in data and len(old) == len(new)
    path.write_bytes(data.replace(old, new))


def test_same_length_damage_is_refused_on_every_dispatch_read_path(tmp_path: Path) -> None:
    rig = Rig(FileStore(tmp_path))
    seq, part = rig.call("export", {})
    key = msgspec.json.decode(text_of(part))["value"]["$ref"]["key"]
    read_seq, _ = rig.call("query_json", {"source": msg(seq, "value"), "path": "/items",
                                          "filter": [{"field": "status", "eq": "open"}]})
    _tamper(tmp_path, key, b'"total":100', b'"total":900')
    attempts: list[tuple[str, Any]] = [
        ("echo", {"x": msg(seq, "value")}),
        ("echo", {"x": envelope(Blob(key=key))}),
        ("echo", {"x": msg(read_seq, "value")}),  # a recipe over the damaged bytes
        ("read_json", {"source": envelope(Blob(key=key)), "path": "/total"}),
        ("query_json", {"source": envelope(Blob(key=key)), "path": "/items"}),
    ]
    for name, args in attempts:
        _, out = rig.call(name, args)
        assert out.is_error, (name, text_of(out))
        assert "integrity" in text_of(out), (name, text_of(out))
        assert "900" not in text_of(out)
    assert rig.received == []


# -- defect 2 (core): a Message ref names one record forever -----------------------------------
def test_a_ref_from_before_a_restart_is_refused_never_answered_by_a_newer_record() -> None:
    first = Rig(origin=fresh_origin())
    seq, _ = first.call("export", {})
    second = Rig(origin=fresh_origin() + 10)  # a later process: its clock has moved on
    second.call("big", {})
    _, out = second.call("echo", {"x": msg(seq, "value")})
    assert out.is_error and second.received == []
    assert "before a restart" in text_of(out)


def test_origins_move_with_the_clock_and_lookups_name_the_range() -> None:
    assert fresh_origin(lambda: 1_767_225_600_000 * 1_000_000 + 5_000_000) == 5
    t = Transcript(origin=500)
    t.append("user", [Part(type="text", value="hi")])
    assert t.last_seq == 500 and t.message(500).seq == 500
    with pytest.raises(TranscriptLookupError, match="begins at message 500"):
        t.message(3)
    with pytest.raises(TranscriptLookupError, match="messages are 500–500"):
        t.message(501)


def test_a_persisted_transcript_reopens_with_its_origin(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Transcript(path, origin=70) as t:
        t.append("user", [Part(type="text", value="a")])
    with Transcript(path, origin=70) as again:
        assert again.last_seq == 70


def test_the_harness_survives_a_model_writing_lone_surrogates_and_huge_integers() -> None:
    from byref.harness import Harness, ScriptedModel, call, say

    seen: list[Any] = []

    @tool
    def take(x: Any) -> str:
        """Take anything."""
        seen.append(x)
        return "ok"

    h = Harness(ScriptedModel([
        call("take", {"x": "bad\udcff"}), call("take", {"x": 10 ** 5_000}),
        call("take", {"x": "fine"}), say("done \ud800")]), [take])
    result = h.run_sync("go")
    assert seen == ["fine"] and "done" in result.text
    assert len(h.transcript) == 8


def test_a_wants_argument_with_a_damaged_record_is_refused_by_name(tmp_path: Path) -> None:
    from byref.store import PutOptions

    seen: list[Any] = []

    @tool(wants={"rows": "dataset/rows"})
    def count(rows: list[Any]) -> int:
        """Count rows."""
        seen.append(rows)
        return len(rows)

    store = FileStore(tmp_path)
    scope = Scope("trust")
    meta = store.put(scope, b"[1,2]", PutOptions(kind="dataset/rows",
                                                 media_type="application/json"))
    _record_file(tmp_path, meta.ref).write_bytes(b"\x00garbage")
    t = Transcript()
    d = Dispatcher([count], transcript=t, store=store, scope=scope)
    for value in (meta.ref, "art_" + "q" * 200_000):
        part = d.dispatch(Call("c", "count", {"rows": value}), call_seq=0, seq=1, part=0)
        assert part.is_error and seen == [] and len(text_of(part)) < REFUSAL_MAX
    assert "could not be read" in text_of(
        d.dispatch(Call("c", "count", {"rows": meta.ref}), call_seq=0, seq=1, part=0))


@pytest.mark.parametrize("rows", [3, 2_000], ids=["inline", "placed"])
def test_a_python_literal_dump_of_rows_is_kept_as_text_and_queryable(rows: int) -> None:
    dump = str([{"id": i, "name": f"n{i}", "ok": i % 2 == 0, "none": None}
                for i in range(rows)])  # what mcp-server-sqlite prints

    @tool
    def sql() -> str:
        """Rows as the server prints them."""
        return dump

    rig = Rig()
    rig.dispatcher.tools["sql"] = sql
    seq, part = rig.call("sql", {})
    source = msg(seq) if rows == 3 else msgspec.json.decode(text_of(part))["value"]
    if rows == 3:
        assert text_of(part) == dump
    rig.call("echo", {"x": source})
    assert rig.received == [dump]  # the text itself, byte for byte
    q_seq, q = rig.call("query_json", {"source": source, "path": "",
                                       "filter": [{"field": "id", "eq": 2}]})
    assert not q.is_error, text_of(q)
    rig.call("echo", {"x": msg(q_seq, "value")})
    assert rig.received[-1] == [{"id": 2, "name": "n2", "ok": True, "none": None}]


def test_null_for_an_optional_argument_means_not_given() -> None:
    seen: list[Any] = []

    @tool
    def page(query: str, limit: int = 10, cursor: str | None = None) -> str:
        """Page through results."""
        seen.append((query, limit, cursor))
        return "ok"

    d = Dispatcher([page], transcript=Transcript(), store=None, scope=Scope("trust"))
    part = d.dispatch(Call("c", "page", {"query": "q", "limit": None, "cursor": None}),
                      call_seq=0, seq=1, part=0)
    assert not part.is_error, text_of(part)
    assert seen == [("q", 10, None)]
    refused = d.dispatch(Call("c", "page", {"query": None}), call_seq=0, seq=1, part=0)
    assert refused.is_error and "'query'" in text_of(refused)  # a required one stays required


def test_arguments_that_are_not_json_are_refused_saying_so() -> None:
    rig = Rig()
    _, part = rig.call("echo", '{"x": 1')  # what an adapter hands over when JSON did not parse
    assert part.is_error and "arrived as text that is not one" in text_of(part)
