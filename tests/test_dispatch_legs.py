"""Dispatch legs: wants (seed 002's worked failure), the placement truth table, present, ctx."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from byref.dispatch import Policy
from byref.dispatch.pipeline import REFUSAL_MAX
from byref.events import Emitter, MemorySink
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.harness.messages import Request
from byref.jsonview import decode, dumps
from byref.store import FileStore, MemoryStore, PutOptions, Retention
from byref.testing import result_text
from byref.tools import ToolContext, tool
from byref.tools.readers.present import placeholder
from byref.transcript import Part, Transcript

REF = r"art_[0-9A-Za-z]{22}"


def results(h: Harness) -> list[Part]:
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"]


def worked_failure_tools(seen: list[Any]) -> list[Any]:
    @tool
    def fetch_sales() -> list[dict[str, Any]]:
        """All sales."""
        return [{"order": i, "amount": i % 97 + 1} for i in range(3_000)]

    @tool
    def fetch_regions(ctx: ToolContext) -> str:
        """Regions, as a dataset."""
        meta = ctx.artifacts.put(dumps([{"region": "north"}, {"region": "south"}]).encode(),
                                 kind="dataset/rows", media_type="application/json",
                                 label="region table")
        return f"stored {meta.ref} [{meta.kind} · {meta.bytes} bytes]"

    @tool(wants={"dataset": "dataset/rows"})
    def summarize(dataset: list[dict[str, Any]], ctx: ToolContext) -> str:
        """Summarize a dataset."""
        seen.append((dataset, ctx.wanted["dataset"].ref))
        return f"{len(dataset)} rows"

    return [fetch_sales, fetch_regions, summarize]


def placed_ref(r: Request) -> str:
    for message in r.messages:
        for block in message.content:
            if block.type == "tool_result" and '"placed":true' in block.text:
                return str(decode(block.text)["value"]["$ref"]["key"])
    raise AssertionError("no placed result")


def test_seed_002_worked_failure_wrong_parcel_then_no_parcel() -> None:
    seen: list[Any] = []
    sink = MemorySink()
    h = Harness(ScriptedModel([
        call("fetch_sales", {}), call("fetch_regions", {}),
        call("summarize", lambda r: {"dataset": placed_ref(r)}),
        call("summarize", {}),
        say("I could not summarize."),
    ]), worked_failure_tools(seen), policy=Policy(validation="off", auto_insert_bytes=2_000),
        emit=Emitter(sink))
    h.run_sync("Summarize the regions.")
    wrong, missing = results(h)[2:4]
    assert seen == []
    assert wrong.is_error and missing.is_error
    assert re.fullmatch(
        f"Tool 'summarize' was not executed: its declared artifact argument did not resolve. "
        f"'dataset' = '{REF}' resolves, but it is 'tool-result/fetch_sales' and this argument "
        f"wants 'dataset/rows': the wrong parcel for this argument. Live 'dataset/rows' refs in "
        f"scope: {REF} \\('region table', 39 bytes\\). Pass one of these.", wrong.rendered or "")
    assert re.fullmatch(
        f"Tool 'summarize' was not executed: its declared artifact argument did not resolve. "
        f"'dataset' is required and no value was passed; this tool wants a 'dataset/rows' "
        f"artifact there, resolved before the tool runs, so it never runs without it. Pass the "
        f"art_… ref as 'dataset'. Live 'dataset/rows' refs in scope: {REF} \\('region table', "
        f"39 bytes\\). Pass one of these.", missing.rendered or "")
    events = [e.data for e in sink.named("refused")]
    assert [(e["op"], e["reason"]) for e in events] == [("dispatch", "kind-mismatch"),
                                                         ("dispatch", "invalid-input")]
    assert events[0]["ref"] == placed_ref(h.request()) and events[1]["ref"] is None


def test_the_right_parcel_runs_and_rides_on_ctx() -> None:
    seen: list[Any] = []
    h = Harness(ScriptedModel([
        call("fetch_regions", {}),
        call("summarize", lambda r: {"dataset": re.search(REF, last_result(r)).group(0)}),
        say("ok")]), worked_failure_tools(seen))
    h.run_sync("go")
    assert seen[0][0] == [{"region": "north"}, {"region": "south"}]
    assert result_text(results(h)[-1]) == "2 rows"


def test_wants_without_a_store_fails_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="Tool\\(s\\) \\['summarize'\\] declare `wants` but no "
                                         "artifact store is attached"):
        Harness(ScriptedModel([]), worked_failure_tools([]), store=None)


def test_digest_mismatch_is_refused(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    seen: list[Any] = []
    h = Harness(ScriptedModel([]), worked_failure_tools(seen), store=store)
    meta = store.put(h.scope, b"[1,2]", PutOptions(
        kind="dataset/rows", media_type="application/json", digest=True, label="nums"))
    next(tmp_path.rglob(f"{meta.ref}*.bin")).write_bytes(b"[1,3]")  # damage staged from outside
    h.model = ScriptedModel([call("summarize", {"dataset": meta.ref}), say("x")])
    h.run_sync("go")
    last = results(h)[-1]
    assert last.is_error and seen == []
    assert f"'dataset' = {meta.ref!r} could not be read:" in (result_text(last))
    assert "failed its integrity check" in (result_text(last))


# -- the placement truth table -----------------------------------------------------------------
BIG = 30_000


@pytest.mark.parametrize("ceiling", [None, 1_000])
@pytest.mark.parametrize("placement", [True, False])
@pytest.mark.parametrize("net", [True, False])
@pytest.mark.parametrize("error", [True, False])
def test_placement_truth_table(ceiling: int | None, placement: bool, net: bool,
                               error: bool) -> None:
    @tool(ceiling=ceiling)
    def produce() -> str:
        """Produce a lot."""
        if error:
            raise RuntimeError("E" * BIG)
        return "line\n" * (BIG // 5)

    policy = Policy(placement=placement, auto_insert_bytes=4_000,
                    max_result_chars=8_000 if net else None)
    h = Harness(ScriptedModel([call("produce", {}), say("ok")]), [produce], policy=policy)
    h.run_sync("go")
    part = results(h)[0]
    text = part.rendered or ""
    if error:
        # Errors are never placed and the ceiling is not consulted; a refusal is bounded at
        # the source (it quotes a tool's message only so far, with its true length).
        assert part.is_error and '"placed":true' not in text
        assert len(text) <= REFUSAL_MAX and "[30,000 characters in all]" in text
        return
    elif ceiling is not None:
        expected = "ceiling"
    elif placement:
        expected = "placed"
    else:
        expected = "truncated" if net else "whole"
    if expected == "ceiling":
        assert part.is_error
        assert text == ("Tool 'produce' produced 30,000 characters, over its own limit of 1,000; "
                        "ask for less (a narrower query, a filter, a page).")
    elif expected == "placed":
        shown = decode(text)
        assert shown["placed"] is True and shown["kind"] == "tool-result/produce"
        assert shown["bytes"] == 30_000 and len(text) < 4_000
    elif expected == "truncated":
        assert len(text) == 8_000 and "[byref truncated this result to 8,000 of" in text
    else:
        assert len(text) >= BIG


def test_store_refusing_the_put_falls_through_to_the_net_with_a_note() -> None:
    @tool
    def produce() -> str:
        """Produce a lot."""
        return "x" * 50_000

    store = MemoryStore(retention=Retention(max_bytes_per_scope=10_000))
    h = Harness(ScriptedModel([call("produce", {}), say("ok")]), [produce], store=store,
                policy=Policy(max_result_chars=20_000))
    h.run_sync("go")
    text = results(h)[0].rendered or ""
    assert len(text) == 20_000
    assert "(placement failed: A payload of 50,000 bytes exceeds this scope's ceiling" in text


# -- present -----------------------------------------------------------------------------------
def test_present_heads_never_gets_and_keeps_a_snapshot() -> None:
    class CountingStore(MemoryStore):
        gets = 0

        def get(self, scope: Any, ref: str) -> Any:
            CountingStore.gets += 1
            return super().get(scope, ref)

    store = CountingStore(retention=Retention(ttl=60))
    now = [1_000.0]
    store.clock = lambda: now[0]
    sink = MemorySink()
    seen: list[Any] = []
    h = Harness(ScriptedModel([
        call("fetch_regions", {}),
        call("present", lambda r: {"ref": re.search(REF, last_result(r)).group(0),
                                   "as": "table", "label": "Regions"}),
        say("shown")]), worked_failure_tools(seen), store=store, emit=Emitter(sink))
    h.run_sync("go")
    shown = results(h)[-1]
    assert not shown.is_error and CountingStore.gets == 0
    snap = shown.value["snapshot"]
    assert snap == {"kind": "dataset/rows", "mediaType": "application/json", "bytes": 39,
                    "label": "Regions"}
    assert sink.named("presented")
    # Later, from the transcript alone, after the artifact expired:
    now[0] += 3_600
    reloaded = Transcript()
    for message in h.transcript:
        reloaded.append(message.role, list(message.parts))
    part = [p for m in reloaded for p in m.parts if p.tool == "present"][-1]
    ref = part.value["presented"]
    assert store.head(h.scope, ref) is None
    assert placeholder(part.value["snapshot"], live=False) == (
        "'Regions' (dataset/rows, 39 bytes) — expired; re-run to regenerate")


def test_present_miss_lists_live_refs() -> None:
    h = Harness(ScriptedModel([call("fetch_regions", {}),
                               call("present", {"ref": "art_" + "q" * 22, "as": "image"}),
                               say("x")]), worked_failure_tools([]))
    h.run_sync("go")
    last = results(h)[-1]
    assert last.is_error
    assert re.fullmatch(
        f"Nothing was presented: 'art_q{{22}}' is not available \\(missing, expired, or not "
        f"stored in this session\\). Live refs in scope: {REF} \\(dataset/rows, 'region table', "
        f"39 bytes\\).", last.rendered or "")


def test_present_is_reserved_only_with_a_store() -> None:
    @tool
    def present(x: str) -> str:
        """Mine."""
        return x

    with pytest.raises(ValueError, match="The tool name 'present' is reserved"):
        Harness(ScriptedModel([]), [present])
    storeless = Harness(ScriptedModel([]), [present], store=None)
    assert [t["name"] for t in storeless.request().tools] == ["present"]


def test_validation_dial() -> None:
    @tool
    def count(n: int) -> int:
        """Count."""
        return n

    for dial, refused in (("enforce", True), ("warn", False), ("off", False)):
        sink = MemorySink()
        h = Harness(ScriptedModel([call("count", {"n": 3, "extra": 1}), say("x")]), [count],
                    policy=Policy(validation=dial), emit=Emitter(sink))  # type: ignore[arg-type]
        h.run_sync("go")
        text = results(h)[-1].rendered or ""
        if refused:
            assert text == ("Tool 'count' was not executed: its input does not fit its schema "
                            "at 'the input': Additional properties are not allowed ('extra' was "
                            "unexpected).")
        else:
            # The tool's own type contract still applies after the dial.
            assert "has no parameter(s) 'extra'" in text
        assert bool([e for e in sink.named("refused") if e.data["op"] == "validate"]) == (
            dial == "warn")
