"""A 40-turn scripted session whose raw transcript is 20× the request budget."""

from __future__ import annotations

from typing import Any

import pytest

from byref.bench.library.context import BUDGET_BYTES, bench_tools, plan, prepare, wire
from byref.context import NOTE_HEAD
from byref.events import Emitter, MemorySink
from byref.harness import Harness, Limits, RunResult, ScriptedModel, call, say
from byref.harness.loop import render, request_bytes
from byref.harness.messages import Request
from byref.jsonview import decode
from byref.store import MemoryStore, Scope

TURNS = 40


@pytest.fixture(scope="module")
def session() -> tuple[Harness, RunResult, MemorySink]:
    store, scope, sink = MemoryStore(), Scope("test", conversation="forty"), MemorySink()
    steps: list[Any] = [call(c.tool, c.input) for c in plan(TURNS, prepare(store, scope))]
    h = Harness(ScriptedModel([*steps, say("Done.")]), bench_tools(), store=store, scope=scope,
                emit=Emitter(sink), limits=Limits(budget=BUDGET_BYTES, max_steps=TURNS))
    run = h.run_sync("Are my technology funds too concentrated?")
    return h, run, sink


def test_it_runs_to_completion_and_every_request_fits(session: Any) -> None:
    h, run, _ = session
    assert run.text == "Done." and len(run.requests) == TURNS
    raw = request_bytes(Request(h.system, run.requests[-1].tools, tuple(render(h.transcript))))
    assert raw >= 20 * BUDGET_BYTES
    for request, assembled in zip(run.requests, h.assembled, strict=True):
        # The check ran on the request actually sent.
        assert assembled.request is request
        assert request_bytes(request) == assembled.bytes <= BUDGET_BYTES


def test_the_prefix_is_byte_identical_whenever_no_new_replacement_was_made(session: Any) -> None:
    h, run, _ = session
    quiet = 0
    for i in range(1, TURNS):
        before, after = h.assembled[i - 1], h.assembled[i]
        head = b"".join(wire(run.requests[i - 1], strip_note=before.note is not None))
        held = b"".join(wire(run.requests[i])).startswith(head)
        if not after.new_groups:
            quiet += 1
            assert held, f"turn {i + 1}: prefix changed without a new replacement"
        else:
            assert not held  # a replacement is the only thing that changes the prefix
    assert quiet >= 5


def test_a_replaced_result_stays_replaced_on_every_later_turn(session: Any) -> None:
    h, run, _ = session
    seen: set[int] = set()
    for assembled in h.assembled:
        now = set(assembled.replaced_groups)
        assert seen <= now
        seen = now
    assert len(seen) >= TURNS // 2
    # Each stub renders the same bytes in every request after its first.
    first = {}
    for request in run.requests:
        for message in request.messages:
            for block in message.content:
                if block.type == "tool_result" and block.text.startswith('{"replaced":true'):
                    assert first.setdefault(block.id, block.text) == block.text


def test_a_current_read_is_never_replaced(session: Any) -> None:
    h, run, sink = session
    results = {p.call_id: p.rendered for m in h.transcript for p in m.parts
               if p.type == "tool_result"}
    for request in run.requests[1:]:
        last = request.messages[-1]
        current = [b for b in last.content if b.type == "tool_result"]
        assert current and all(b.text == results[b.id] for b in current)
    covered = [e.data for e in sink.events if e.name == "covered"]
    assert len(covered) == TURNS - 1
    assert all(c["inRequest"] and not c["replaced"] for e in covered for c in e["current"])
    reads = [c for e in covered for c in e["current"] if c["tool"] == "read_result"]
    assert reads and all("selection" in c for c in reads)


def test_after_compaction_the_note_lists_live_handles_from_facts(session: Any) -> None:
    h, run, _ = session
    first = next(i for i, a in enumerate(h.assembled) if a.replaced_groups)
    assert all(a.note is None for a in h.assembled[:first])
    note = run.requests[first].messages[-1].content[-1]
    assert note.type == "text" and note.text.startswith(NOTE_HEAD)
    assert len(note.text.encode()) <= 2_048
    entries = [decode(line) for line in note.text.splitlines()[1:]]
    holdings = next(e for e in entries if e["kind"] == "result/fetch_holdings")
    assert holdings["label"] == "holdings table" and holdings["rows"] == 4_000
    assert holdings["bytes"] > BUDGET_BYTES  # readable, though far bigger than a request
    replaced = [e for e in entries if e["kind"].startswith("result of ")]
    assert replaced and all(e["ref"]["$ref"]["type"] == "Message" for e in replaced)
