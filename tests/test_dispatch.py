"""Dispatch end to end through the harness: refs in, markers and refs out, refusals that teach."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest

from byref.dispatch import Policy
from byref.dispatch.outbound.reflines import ref_line
from byref.events import Emitter, MemorySink
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.harness.messages import Request
from byref.jsonview import decode
from byref.refs import Blob, JsonQuery, MessageRef
from byref.store import FileStore, MemoryStore, Scope
from byref.testing import result_text
from byref.tools import BUILTIN_JSON_TOOLS, Payload, tool
from byref.transcript import Part

ROWS = [{"id": i, "status": "open" if i % 4 == 0 else "done", "title": f"t{i}"} for i in range(50)]
DOC = {"items": ROWS}


class Received:
    def __init__(self) -> None:
        self.calls: list[Any] = []


def make_tools(received: Received) -> list[Any]:
    @tool
    def export() -> Payload:
        """Export everything."""
        import msgspec

        return Payload.from_bytes(msgspec.json.encode(DOC), "application/json", kind="export")

    @tool
    def pdf() -> Payload:
        """A PDF."""
        return Payload.from_bytes(b"%PDF-1.7 binary", "application/pdf", kind="report/pdf")

    @tool
    def take(rows: list[dict[str, Any]]) -> int:
        """Take rows."""
        received.calls.append(rows)
        return len(rows)

    @tool
    def broken() -> Any:
        """Returns what cannot be recorded, after minting an artifact."""
        return {"file": Payload.from_bytes(b"abc", "text/plain"), "bad": object()}

    @tool
    def huge() -> list[dict[str, Any]]:
        """A big structured result."""
        return [{"i": i, "pad": "x" * 100} for i in range(1000)]

    return [export, pdf, take, broken, huge]


def run(script: list[Any], store: Any = None) -> tuple[Harness, Received, MemorySink]:
    received, sink = Received(), MemorySink()
    harness = Harness(ScriptedModel([*script, say("done")]),
                      [*make_tools(received), *BUILTIN_JSON_TOOLS],
                      store=store or MemoryStore(), emit=Emitter(sink))
    harness.run_sync("go")
    return harness, received, sink


def results(h: Harness) -> list[Part]:
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"]


def ref_of(field: str = "value") -> Any:
    return lambda r: last_result(r)[field]


QUERY = call("query_json", lambda r: {"source": last_result(r)["value"], "path": "/items",
                                      "filter": [{"field": "status", "eq": "open"}]})


def test_round_trip_delivers_exact_rows_lazily() -> None:
    h, received, _ = run([call("export", {}), QUERY, call("take", lambda r: {"rows": ref_of()(r)})])
    expected = [r for r in ROWS if r["status"] == "open"]
    assert received.calls == [expected]
    marker, query, took = results(h)
    assert decode(result_text(marker))["opaque"] is True
    shown = decode(result_text(query))
    assert shown["count"] == len(expected)
    assert shown["value"] == {"$ref": {"type": "Message", "seq": 4, "part": 0, "field": "value"}}
    assert isinstance(query.derived["value"], JsonQuery)
    assert took.rendered == f"{len(expected)}\n{ref_line(6, 0)}"


def test_recipe_is_evaluated_at_use_and_a_vanished_source_refuses(tmp_path: Any) -> None:
    store = MemoryStore()

    def delete_then_use(r: Request) -> dict[str, Any]:
        key = h_ref[0]
        store.delete(h_scope[0], key)
        return {"rows": last_result(r)["value"]}

    h_ref: list[str] = []
    h_scope: list[Scope] = []

    def query(r: Request) -> dict[str, Any]:
        h_ref.append(last_result(r)["value"]["$ref"]["key"])
        return {"source": last_result(r)["value"], "path": "/items"}

    received, sink = Received(), MemorySink()
    h = Harness(ScriptedModel([call("export", {}), call("query_json", query),
                               call("take", delete_then_use), say("done")]),
                [*make_tools(received), *BUILTIN_JSON_TOOLS], store=store, emit=Emitter(sink))
    h_scope.append(h.scope)
    h.run_sync("go")
    last = results(h)[-1]
    assert last.is_error and received.calls == []
    assert f"Artifact {h_ref[0]!r} is not available: it is missing, expired, or was never " \
           "stored in this session." in (result_text(last))
    assert sink.named("refused")[-1].data["reason"] == "bad-ref"


def test_stale_recipe_raises_never_empty(tmp_path: Any) -> None:
    store = FileStore(tmp_path)
    h, _received, _ = run([call("export", {}), QUERY], store=store)
    # The stored object changes under the recipe (an operator rewrote it): the path is gone.
    query_part = results(h)[1]
    recipe = query_part.derived["value"]
    assert isinstance(recipe, JsonQuery) and isinstance(recipe.source, Blob)
    key = recipe.source.key
    payload = next(tmp_path.rglob(f"{key}.bin"))
    size = payload.stat().st_size
    changed = b'{"rows": []}'.ljust(size)  # same length, different document
    payload.write_bytes(changed)
    # ... and recorded its digest too (else the integrity check refuses it before the recipe).
    record = next(tmp_path.rglob(f"{key}.json"))
    meta = decode(record.read_bytes())
    meta["digest"] = "sha256:" + hashlib.sha256(changed).hexdigest()
    record.write_bytes(msgspec.json.encode(meta))
    value = h.dispatcher.resolver
    with pytest.raises(Exception, match=f"Derived JSON path '/items' no longer exists in "
                                        f"artifact {key!r}"):
        value.value(MessageRef(part=0, seq=4, field="value"))


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ({"$ref": {"type": "JsonQuery", "source": {"type": "Blob", "key": "art_" + "x" * 22},
                   "path": "/items", "filter": []}},
         "argument 'rows' is a reference that cannot be used. References of type 'JsonQuery' "
         "are built by the server"),
        ({"$ref": {"type": "Message", "seq": 42, "part": 0}},
         "message 42 does not exist; messages are 0–"),
        ({"$ref": {"type": "Message", "seq": 2, "part": 3}}, "message 2 has part 0; there is no "
                                                             "part 3."),
        ({"$ref": {"type": "Message", "seq": 2, "part": 0, "field": "valu"}},
         "has no field 'valu'; fields there: 'opaque', 'value', 'kind', 'bytes', 'mediaType'."),
        ({"$ref": {"type": "Blob", "key": "art_" + "z" * 22}},
         "Artifact 'art_zzzzzzzzzzzzzzzzzzzzzz' is not available"),
        ({"$ref": {"type": "Message", "seq": 2, "part": 0}, "x": 1},
             "is almost a reference, but not quite. It has key(s) 'x' beside '$ref'"),
    ],
)
def test_bad_refs_are_refused_and_the_tool_does_not_run(rows: Any, message: str) -> None:
    h, received, sink = run([call("export", {}), call("take", {"rows": rows})])
    last = results(h)[-1]
    assert last.is_error
    assert message in (result_text(last))
    assert received.calls == []
    assert sink.named("refused")


def test_non_json_bytes_under_a_json_recipe() -> None:
    h, _, _ = run([call("pdf", {}), call("query_json", lambda r: {
        "source": last_result(r)["value"], "path": "/items"})])
    last = results(h)[-1]
    assert last.is_error
    assert "holds 'application/pdf', not JSON, so a JSON path cannot apply to it." in (
        last.rendered or "")


def test_unrecordable_result_keeps_nothing() -> None:
    store = MemoryStore()
    h, _, sink = run([call("broken", {})], store=store)
    last = results(h)[-1]
    assert last.is_error
    assert (result_text(last)).startswith("Tool 'broken' returned a value that cannot be "
                                            "recorded")
    assert store.list(h.scope) == []
    assert sink.named("refused")[-1].data["reason"] == "unserializable-result"


def test_chain_past_the_resolution_cap() -> None:
    h, _received, _ = run([call("export", {})])
    # Server code records a chain of derived refs, each pointing at the previous message.
    seq = h.transcript.last_seq
    assert seq is not None
    for _ in range(7):
        h.transcript.append("tool", [Part(type="tool_result", value={"value": None},
                                          derived={"value": MessageRef(part=0, seq=seq,
                                                                    field="value")})])
        seq += 1
    with pytest.raises(Exception, match="takes more than 6 steps to resolve"):
        h.dispatcher.resolver.value(MessageRef(part=0, seq=seq, field="value"))


def test_unknown_tool_suggests_close_names() -> None:
    h, _, _ = run([call("exprot", {})])
    assert results(h)[-1].rendered == "There is no tool 'exprot'. Tools you can call: 'export'."


def test_placement_stores_large_results_and_the_ref_reads_back() -> None:
    h, received, sink = run([call("huge", {}),
                             call("take", lambda r: {"rows": last_result(r)["value"]})])
    placed = results(h)[0]
    text = placed.rendered or ""
    assert len(text) < 4_000
    shown = decode(text)
    assert shown["placed"] is True and shown["shape"].startswith("JSON array, 1,000 items")
    assert received.calls[0] == [{"i": i, "pad": "x" * 100} for i in range(1000)]
    assert sink.named("placed")


def test_whole_input_may_be_one_ref() -> None:
    h, _received, _ = run([
        call("read_json", lambda r: {"source": {"$ref": {"type": "Message", "seq": 0,
                                                         "part": 0}}}),
    ])
    assert results(h)[-1].is_error is False
    assert decode(result_text(results(h)[-1]))["preview"] == "go"
    # The whole input of a call may be one ref: here, to an earlier call's own input.
    rows = [{"a": 1}]
    h2, received2, _ = run([
        call("take", {"rows": rows}),
        call("take", {"$ref": {"type": "Message", "seq": 1, "part": 0, "field": "input"}}),
    ])
    assert received2.calls == [rows, rows]
    assert not results(h2)[-1].is_error


def test_naive_policy_inlines_everything() -> None:
    received = Received()
    h = Harness(ScriptedModel([call("export", {}), say("done")]), make_tools(received),
                policy=Policy.naive())
    h.run_sync("go")
    assert decode(result_text(results(h)[0])) == DOC
    schema = h.request().tools[0]["input_schema"]
    assert "anyOf" not in str(schema)


def test_events_never_carry_payload_bytes() -> None:
    _, _, sink = run([call("export", {}), QUERY])
    text = str([e.to_json() for e in sink.events])
    assert "t12" not in text and "status" not in text
