"""`byref.testing`: the scripted model's helpers and the store battery, as a user's tests use
them."""

from __future__ import annotations

from typing import Any

import pytest

import byref
from byref.store import MemoryStore
from byref.store.conformance.runner import CASES
from byref.testing import (
    ScriptedModel,
    StoreBattery,
    assert_store_conforms,
    call,
    parallel,
    ref_from_last_result,
    results,
    say,
)

ROWS = [{"id": i, "pad": "x" * 80} for i in range(500)]


@byref.tool
def export() -> list[dict[str, Any]]:
    """Every row (large: stored, shown as a preview and a ref)."""
    return ROWS


@byref.tool
def count(rows: list[dict[str, Any]]) -> int:
    """Count rows."""
    return len(rows)


def test_a_script_passes_a_ref_and_parallel_calls_share_a_turn() -> None:
    model = ScriptedModel([
        call("export", {}),
        parallel(call("count", lambda r: {"rows": ref_from_last_result()(r)}),
                 call("count", {"rows": [{}, {}]})),
        say("Done."),
    ])
    run = byref.Harness(model, [export, count]).run_sync("go")
    assert run.text == "Done." and run.steps == 3
    got = results(run)
    assert [p.value for p in got[1:]] == [500, 2]
    assert got[1].call_id != got[2].call_id
    tool_messages = [m for m in run.transcript if m.role == "tool"]
    assert [len(m.parts) for m in tool_messages] == [1, 2]  # one turn, two results


class Forgetful(MemoryStore):
    """A defective adapter: it loses every artifact's label."""

    def put(self, scope: Any, data: Any, **options: Any) -> Any:
        options.pop("label", None)
        return super().put(scope, data, **options)


def test_the_store_battery_passes_a_real_store_and_names_what_a_broken_one_breaks() -> None:
    quick = [c for c in CASES if c.name in ("round-trip", "one-absence", "idempotent-delete")]
    report = assert_store_conforms("memory://", quick)
    assert report.ok and {r.outcome for r in report.results} == {"passed"}
    with pytest.raises(AssertionError) as caught:
        assert_store_conforms(StoreBattery(name="forgetful", create_store=Forgetful),
                              [c for c in CASES if c.name == "round-trip"])
    text = str(caught.value)
    assert text.startswith("Artifact store conformance: forgetful") and "FAIL" in text
