"""Code mode and the refs a result carries: `query_json`'s and `read_json`'s recipe `value`, and
Blob and Message refs nested in a structured result, reach the program as handles; passed on,
the host swaps in the ref itself (no bytes cross the channel), and the next tool receives
exactly what the ref names."""

from __future__ import annotations

from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode, encode
from byref.refs import Blob, Clause, JsonQuery
from byref.store import MemoryStore, Scope
from byref.tools import Payload, ToolContext, tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

ORDERS = [{"id": i, "status": "late" if i % 7 == 0 else "ok", "total": i * 3}
          for i in range(20_000)]
LATE = [o for o in ORDERS if o["status"] == "late"]


def _runner() -> SubprocessRunner:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    return SubprocessRunner()


def _tools(seen: list[Any]) -> list[Any]:
    @tool
    def orders() -> Payload:
        """Every order as one JSON document."""
        return Payload.from_bytes(encode({"orders": ORDERS}), "application/json")

    @tool
    def tally(data: Any) -> dict[str, Any]:
        """Count the rows (or keys) handed over."""
        seen.append(data)
        return {"n": len(data)}

    @tool
    def bundle(ctx: ToolContext) -> dict[str, Any]:
        """Store the orders; answer refs to them nested in a structured result."""
        meta = ctx.artifacts.put(encode({"orders": ORDERS}), kind="dataset/json",
                                 media_type="application/json")
        late = JsonQuery(Blob(key=meta.ref), "/orders", (Clause.equals("status", "late"),))
        return {"label": "kept", "parts": [{"file": Blob(key=meta.ref)}, {"late": late}]}

    @tool
    def echo(text: str) -> str:
        """Answer `text` as it came."""
        seen.append(text)
        return text

    return [orders, tally, bundle, echo]


def _run(code: str, *, seen: list[Any] | None = None, store: Any = None,
         scope: Scope | None = None) -> tuple[Part, Harness]:
    h = Harness(ScriptedModel([call("run_code", {"code": code}), say("done")]),
                _tools(seen if seen is not None else []), store=store or MemoryStore(),
                code_mode=CodeMode(runner=_runner()), scope=scope)
    h.run_sync("go")
    results = [p for m in h.transcript for p in m.parts if p.type == "tool_result"]
    return results[-1], h


def _text(part: Part) -> str:
    return part.rendered or ""


QUERY = ("big = tools.orders()\n"
         "late = tools.query_json(source=big, path='/orders',"
         " filter=[{'field': 'status', 'eq': 'late'}])\n")


def test_query_jsons_value_is_a_handle_the_next_tool_receives_exactly() -> None:
    seen: list[Any] = []
    part, _ = _run(QUERY + "v = late['value']\n"
                   "print(type(v).__name__, v.kind, v.bytes, v.shape)\n"
                   "print(tools.tally(data=v))\n", seen=seen)
    text = _text(part)
    assert not part.is_error, text
    assert f"Handle json {len(encode(LATE))} JSON array, {len(LATE):,} items" in text, text
    assert f"{{'n': {len(LATE)}}}" in text
    assert encode(seen[0]) == encode(LATE)  # exactly the filtered rows, byte for byte


def test_read_jsons_pointer_value_is_passed_on_exactly() -> None:
    seen: list[Any] = []
    part, _ = _run("big = tools.orders()\n"
                   "one = tools.read_json(source=big, path='/orders/7')\n"
                   "print(tools.tally(data=one['value']))\n"
                   "print(one['value'].json())\n", seen=seen)
    text = _text(part)
    assert "{'n': 3}" in text, text
    assert seen == [ORDERS[7]]
    assert str(ORDERS[7]) in text


def test_the_handles_chunks_are_the_exact_json() -> None:
    part, _ = _run(QUERY + "v = late['value']\n"
                   "data = b''.join(v.chunks(4096))\n"
                   "import hashlib\n"
                   "print(len(data), hashlib.sha256(data).hexdigest())\n"
                   "print(sum(1 for _ in v.chunks(1000)))\n")
    import hashlib
    want = encode(LATE)
    text = _text(part)
    assert f"{len(want)} {hashlib.sha256(want).hexdigest()}" in text, text
    assert f"\n{-(-len(want) // 1000)}\n" in text  # read in bounded pieces


def test_the_dict_holding_the_handle_passes_on_and_the_record_keeps_the_recipe() -> None:
    seen: list[Any] = []
    part, h = _run(QUERY + "print(tools.tally(**{'data': late['value']}))\n", seen=seen)
    assert encode(seen[0]) == encode(LATE)
    key = _text(part).split("record ")[1].split(".")[0]
    kept = h.store.get(h.scope, key)
    assert kept is not None
    lines = [decode(ln) for ln in kept.data.splitlines()]
    calls = [p for m in lines for p in m["parts"] if p["type"] == "tool_call"
             and p["value"]["name"] == "tally"]
    # The inner call's input names the recipe (lineage), never the rows.
    assert calls[0]["derived"]["input.data"]["type"] == "JsonQuery"
    assert "late" in str(calls[0]["value"]["input"]) and '"total"' not in str(calls[0])


def test_a_returned_recipe_handle_reaches_the_model_as_a_ref_it_can_pass() -> None:
    seen: list[Any] = []
    h = Harness(ScriptedModel([
        call("run_code", {"code": QUERY + "{'late': late['value']}"}),
        call("tally", {"data": {"$ref": {"type": "Message", "seq": 2, "part": 0,
                                         "field": "1.late"}}}),
        say("done")]), _tools(seen), store=MemoryStore(), code_mode=CodeMode(runner=_runner()))
    h.run_sync("go")
    results = [p for m in h.transcript for p in m.parts if p.type == "tool_result"]
    shown = _text(results[0])
    # Block 1 of the run's result (0 is its summary line), as the model passes any field.
    assert '\n{"late":{"$ref":{"type":"Message","seq":2,"part":0,"field":"1.late"}}}\n' in shown, \
        shown
    assert "JsonQuery" not in shown  # the model never sees a recipe it cannot write
    assert not results[1].is_error, _text(results[1])
    assert encode(seen[0]) == encode(LATE)


def test_refs_nested_in_a_structured_result_are_handles() -> None:
    seen: list[Any] = []
    part, _ = _run("r = tools.bundle()\n"
                   "f, late = r['parts'][0]['file'], r['parts'][1]['late']\n"
                   "print(r['label'], type(f).__name__, f.bytes, type(late).__name__, late.shape)\n"
                   "print(tools.tally(data=late))\n"
                   "print(tools.tally(data=f))\n", seen=seen)
    text = _text(part)
    assert (f"kept Handle {len(encode({'orders': ORDERS}))} Handle JSON array, "
            f"{len(LATE):,} items") in text, text
    assert encode(seen[0]) == encode(LATE)
    assert seen[1] == {"orders": ORDERS}  # the Blob's document, resolved host-side


def test_a_recipe_from_another_conversation_is_refused() -> None:
    store = MemoryStore()
    first, _ = _run(QUERY + "print(late['value'].ref)\n", store=store,
                    scope=Scope("local", conversation="first"))
    written = _text(first).split("\n")[1]
    assert written.startswith('{"$ref":{"type":"JsonQuery"'), _text(first)
    body = decode(written)["$ref"]  # the recipe as byref records it
    assert (body["path"], body["filter"]) == ("/orders", [{"field": "status", "eq": "late"}])
    seen: list[Any] = []
    part, _ = _run(f"import json\nref = json.loads({written!r})\n"
                   "for arg in [ref, {'$handle': 'h2'}]:\n"
                   "    try:\n        tools.tally(data=arg)\n"
                   "    except tools.ToolError as e:\n        print('refused', e.reason)\n",
                   store=store, scope=Scope("local", conversation="second"), seen=seen)
    assert _text(part).count("refused bad-ref") == 2, _text(part)
    assert seen == []

