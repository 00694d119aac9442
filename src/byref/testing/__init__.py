"""byref.testing: public helpers for testing code built on byref, offline and exact.

Owns what a test of an agent built on byref needs and byref's own tests use: a scripted model
that reads what it was shown (`ScriptedModel`, `call`, `say`, `parallel`, `last_result`,
`last_ref`, `ref_from_last_result`), an OpenAI endpoint on loopback (Chat Completions and
Responses) that plays such a script for any OpenAI client (`ChatStandIn`, in
`byref.testing.chat`), the results of a run
(`results`, and `result_text`: what the model was shown of one, without its ref line), and the
artifact-store battery every
adapter runs (`StoreBattery`, `battery_for_url`, `assert_store_conforms`, and `Damage` /
`register_damage` for an adapter's damage hooks). The law: nothing here
fakes a component — the scripted model is a real `Model`, the battery runs real stores — and
nothing here imports a test framework (a failed check raises `AssertionError`).

    from byref.testing import ScriptedModel, call, say, ref_from_last_result
    model = ScriptedModel([call("export", {}), call("count", lambda r: {
        "rows": ref_from_last_result()(r)}), say("Done.")])

    assert_store_conforms(StoreBattery(name="mine", create_store=lambda: MyStore(...)))
"""

from __future__ import annotations

from collections.abc import Sequence

from byref.dispatch.outbound.reflines import split
from byref.harness.loop import RunResult
from byref.harness.messages import Block, Request, Response
from byref.harness.scripted import (
    ScriptedModel,
    ScriptExhaustedError,
    Step,
    call,
    last_ref,
    last_result,
    ref_from_last_result,
    say,
)
from byref.store.conformance.corruption import Damage, find_damage, register_damage
from byref.store.conformance.runner import (
    CASES,
    Case,
    Report,
    StoreBattery,
    battery_for_url,
    format_report,
    run_conformance,
)
from byref.testing.chat import ChatStandIn
from byref.transcript import Part


def parallel(*steps: Step) -> Step:
    """One model turn that makes the calls of several `call(...)` steps at once (their results
    are recorded in this order); a `say(...)` among them adds its text to the turn."""

    def step(request: Request) -> Response:
        blocks: list[Block] = []
        for s in steps:
            blocks.extend((s(request) if callable(s) else s).blocks)
        return Response(tuple(blocks))

    return step


def results(run: RunResult) -> list[Part]:
    """Every tool result of a run, in the order they were recorded."""
    return [part for message in run.transcript if message.role == "tool"
            for part in message.parts]


def result_text(part: Part | str) -> str:
    """What the model was shown of a result (a part, or the text an adapter handed the model),
    without the ref line under it."""
    if isinstance(part, str):
        return split(part)[0]
    return split(part.rendered if part.rendered is not None else str(part.value))[0]


def assert_store_conforms(battery: StoreBattery | str, cases: Sequence[Case] = CASES
                          ) -> Report:
    """Run the store battery (a `StoreBattery`, or a store URL) and raise `AssertionError`
    with the report's text unless every case passed or was declared; returns the report."""
    rig = battery_for_url(battery) if isinstance(battery, str) else battery
    report = run_conformance(rig, cases)
    if not report.ok:
        raise AssertionError(format_report(report))
    return report


__all__ = [
    "CASES", "ChatStandIn", "Damage", "Report", "ScriptExhaustedError", "ScriptedModel", "Step",
    "StoreBattery",
    "assert_store_conforms", "battery_for_url", "call", "find_damage", "format_report",
    "last_ref", "last_result", "parallel", "ref_from_last_result", "register_damage",
    "result_text", "results", "say",
]
