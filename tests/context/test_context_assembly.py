"""Assembly failures are loud, reads respect the request room, stubs reread exactly."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import pytest

from byref.cli import main
from byref.context import ContextAssembler, ContextBudgetError, RequestBudget
from byref.harness import Harness, Limits, ScriptedModel, call, last_result, say
from byref.harness.loop import render, request_bytes
from byref.harness.messages import Request
from byref.reads import ResultVersions
from byref.refs import Blob
from byref.tools import ToolContext, tool


@tool
def big(n: int) -> str:
    """Return n kilobytes of text."""
    return "word " * (n * 200)


@tool
def kept(ctx: ToolContext) -> dict[str, Any]:
    """Keep a 2,000-row table."""
    assert ctx.store is not None
    rows = [{"id": f"R{i:04d}", "memo": "m" * 60} for i in range(2_000)]
    version = ResultVersions(ctx.store, ctx.scope).keep("kept", {}, rows, id_field="id")
    return {"table": Blob(key=version.ref)}


def test_a_current_result_that_cannot_fit_fails_loudly_instead_of_being_cut() -> None:
    model = ScriptedModel([call("big", {"n": 20}), say("never reached")])
    h = Harness(model, [big], limits=Limits(budget=12_000))
    with pytest.raises(ContextBudgetError) as err:
        h.run_sync("go")
    fixed = request_bytes(Request(h.system, h.requests[0].tools, ()))
    part = h.transcript.message(2).parts[0]
    size = request_bytes(Request(h.system, h.requests[0].tools, tuple(render(h.transcript))))
    assert str(err.value) == (
        f"The request needs {size:,} bytes but its budget is 12,000 bytes, and every older "
        f"settled tool result is already replaced. What would not fit: the system text and "
        f"tool declarations ({fixed:,} bytes); the latest tool group: big (message 2 part 0, "
        f"{len((part.rendered or '').encode()):,} bytes); plus the conversation's own text. A "
        "current read is never shortened to fit: raise the budget, or read less (a smaller "
        "limit, fewer fields, or max_bytes)."
    )
    assert len(model.seen) == 1  # the over-budget request was never sent


def test_the_assembler_never_replaces_the_latest_group_even_when_over_budget() -> None:
    h = Harness(ScriptedModel([call("big", {"n": 3}), call("big", {"n": 3}), say("ok")]),
                [big])
    h.run_sync("go")
    assembler = ContextAssembler(RequestBudget(5_000, low_water=0.1))
    messages = list(h.transcript)[:-1]  # the request before the final answer
    done = assembler.assemble(messages, build=lambda v: Request(h.system, (), tuple(render(v))),
                              measure=request_bytes)
    assert assembler.replaced == {(2, 0)}  # the older group only
    assert (4, 0) not in assembler.replaced and done.bytes <= 5_000


def read_on(request: Request) -> dict[str, Any]:
    """The next read of the same version, from where the last one stopped."""
    answer = last_result(request)
    return {"ref": {"$ref": {"type": "Blob", "key": answer["source"]["ref"]}},
            "offset": answer["coverage"]["range"][1]}


def test_an_explicit_read_is_bounded_by_the_room_left_in_the_request() -> None:
    steps = [call("kept", {}),
             call("read_result", lambda r: {"ref": last_result(r)["table"]}),
             call("read_result", read_on),
             say("done")]
    h = Harness(ScriptedModel(steps), [kept], limits=Limits(budget=40_000))
    run = h.run_sync("read it all")
    first, second = last_result(run.requests[2]), last_result(run.requests[3])
    assert first["byteBudget"]["limitedBy"] == "request_room"
    assert first["coverage"]["byteComplete"] is False and first["coverage"]["hasMore"] is True
    assert second["coverage"]["range"][0] == first["coverage"]["range"][1]  # reads on, exactly
    assert all(a.bytes <= 40_000 for a in h.assembled)


@pytest.mark.parametrize("store", ["memory", None])
def test_a_replaced_result_rereads_exactly_through_its_stub(store: Any) -> None:
    def reread(request: Request) -> dict[str, Any]:
        for message in request.messages:
            for block in message.content:
                if block.type == "tool_result" and block.text.startswith('{"replaced":true'):
                    return {"ref": json.loads(block.text)["reread"]}
        raise AssertionError("nothing was replaced")

    steps = [call("big", {"n": 6}), call("big", {"n": 6}), call("big", {"n": 6}),
             call("read_result", reread), say("done")]
    h = Harness(ScriptedModel(steps), [big], store=store, limits=Limits(budget=16_000))
    run = h.run_sync("go")
    answer = last_result(run.requests[-1])
    assert answer["text"] == "word " * 1_200 and answer["coverage"]["inputComplete"] is True


def test_without_a_budget_the_harness_is_unchanged() -> None:
    h = Harness(ScriptedModel([call("big", {"n": 1}), call("big", {"n": 30}), say("ok")]),
                [big])
    run = h.run_sync("go")
    assert h.assembler is None and h.assembled == []
    # The readers a stored result's note names are declared from the request after it.
    assert [[t["name"] for t in r.tools] for r in run.requests] == [
        ["big"], ["big"], ["big", "present", "query_json", "read_json", "read_result"]]
    assert run.requests[-1] == Request(h.system, run.requests[-1].tools,
                                       tuple(render(h.transcript))[:-1])


def test_bench_context_turns_prints_per_turn_figures() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bench", "context", "--turns", "8", "--json"]) == 0
    report = json.loads(out.getvalue())
    assert report["turns"] == 8 and report["all_fit"] is True
    assert set(report["per_turn"][0]) == {"turn", "request_bytes", "replaced_groups",
                                          "new_replacements", "identical_prefix_share",
                                          "prefix_held"}
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["bench", "context", "--turns", "1"]) == 2
    assert err.getvalue() == "byref bench context: --turns must be at least 2, got 1\n"
