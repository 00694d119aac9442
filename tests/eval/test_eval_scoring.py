"""Each suite's scoring on hand-made traces: a correct run, a retyped-wrong value, a malformed
ref, a wrong tool (and, for selection, a search that never finds the tool). Every trace is a
scripted model played through the eval's own runner, so the verdict comes from the tools' state
and dispatch's refusals, as on a real model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from byref.eval.record import TokenTally
from byref.eval.runner import Options, run_task
from byref.eval.suites import corpus, selection, status
from byref.eval.task import Task
from byref.harness import ScriptedModel, call, say
from byref.harness.messages import Request
from byref.harness.scripted import Step, last_result

MALFORMED = {"$ref": {"type": "Message", "seq": "two", "part": 0}}


def verdict(task: Task, arm: str, steps: Sequence[Step], tmp_path: Path) -> str:
    row = run_task(task, arm, Options(), TokenTally(), ScriptedModel(steps), tmp_path)
    return str(row["verdict"])


def oracle(task: Task, arm: str) -> list[Step]:
    script = task.oracle(arm)
    assert not isinstance(script, ScriptedModel)
    return list(script)


@pytest.fixture(scope="module")
def lookup() -> Task:
    [task] = [t for t in corpus.tasks((50,)) if t.id == "lookup-50"]
    return task


def test_corpus_correct_runs_pass_in_every_arm(lookup: Task, tmp_path: Path) -> None:
    for arm in ("inline", "refs"):
        assert verdict(lookup, arm, oracle(lookup, arm), tmp_path / arm) == "ok"


def test_corpus_a_retyped_value_one_character_off_is_wrong_arguments(
        lookup: Task, tmp_path: Path) -> None:
    def retyped(request: Request) -> dict[str, Any]:
        rows = last_result(request)["customers"]
        email = rows[(len(rows) * 2) // 3]["email"]
        return {"value": email.replace("@", "@@")}

    steps = [call("list_customers", {}), call("answer", retyped), say("Done.")]
    assert verdict(lookup, "inline", steps, tmp_path) == "wrong_arguments"


def test_corpus_a_malformed_ref_is_named_so(lookup: Task, tmp_path: Path) -> None:
    steps = [call("list_customers", {}), call("answer", {"value": MALFORMED}),
             say("I could not do it.")]
    assert verdict(lookup, "refs", steps, tmp_path) == "malformed_ref"


def test_corpus_a_ref_to_nothing_is_a_refused_ref(lookup: Task, tmp_path: Path) -> None:
    gone = {"$ref": {"type": "Blob", "key": "art_" + "A" * 22}}
    steps = [call("list_customers", {}), call("answer", {"value": gone}), say("Sorry.")]
    assert verdict(lookup, "refs", steps, tmp_path) == "refused_ref"


def test_corpus_the_wrong_tool_and_giving_up(lookup: Task, tmp_path: Path) -> None:
    wrong = [call("list_customers", {}), call("send_notice", {"rows": []}), say("Done.")]
    assert verdict(lookup, "refs", wrong, tmp_path / "wrong") == "wrong_tool"
    assert verdict(lookup, "refs", [say("I cannot.")], tmp_path / "quit") == "gave_up"


def test_a_run_past_its_steps_is_budget_exceeded(lookup: Task, tmp_path: Path) -> None:
    loop = [call("list_customers", {})] * 13
    assert verdict(lookup, "refs", loop, tmp_path) == "budget_exceeded"


@pytest.fixture(scope="module")
def chain() -> Task:
    nestful = pytest.importorskip("byref.eval.suites.nestful")
    pytest.importorskip("data_v1", reason="needs NESTFUL's data (nestful-wrapper)")
    [task] = [t for t in nestful.tasks() if t.id == "sample-00"]
    return task


def test_nestful_verdicts(chain: Task, tmp_path: Path) -> None:
    right = oracle(chain, "refs")
    assert verdict(chain, "refs", right, tmp_path / "ok") == "ok"
    assert verdict(chain, "inline", oracle(chain, "inline"), tmp_path / "inline") == "ok"
    # The first airport's skyId retyped with one character changed: every later value differs.
    inline = oracle(chain, "inline")

    def typo(request: Request) -> Any:
        made = inline[2](request)
        block = made.blocks[0] if not callable(made) else None
        assert block is not None
        args = dict(block.input)
        args["originSkyId"] = args["originSkyId"][:-1] + "?"
        return call(block.name, args)(request)

    retyped = [*inline[:2], typo, *inline[3:]]
    assert verdict(chain, "inline", retyped, tmp_path / "typo") == "wrong_arguments"
    malformed = [*right[:2], call("SkyScrapperFlightSearch", {
        "originSkyId": MALFORMED, "destinationSkyId": "x", "originEntityId": "x",
        "destinationEntityId": "x", "date": "2024-08-15"}), say("It failed.")]
    assert verdict(chain, "refs", malformed, tmp_path / "bad") == "malformed_ref"
    distractor = next(t.name for t in chain.build("refs", tmp_path).tools
                      if t.name not in chain.build("refs", tmp_path).allowed)
    wrong = [call(distractor, {}), say("Done.")]
    assert verdict(chain, "refs", wrong, tmp_path / "wrong") == "wrong_tool"


def test_nestful_simulation_is_deterministic_per_seed() -> None:
    pytest.importorskip("data_v1", reason="needs NESTFUL's data (nestful-wrapper)")
    from byref.eval.suites.nestful_sim import dataset, simulate

    _, specs = dataset()
    spec = specs["SkyScrapperSearchAirport"]
    paths = ["skyId", "entityId"]
    first = simulate(spec, {"query": "London"}, 0, paths)
    assert first == simulate(spec, {"query": "London"}, 0, paths)
    assert first != simulate(spec, {"query": "London"}, 1, paths)
    assert first != simulate(spec, {"query": "Paris"}, 0, paths)
    assert {"skyId", "entityId"} <= set(first)
    # Only required parameters seed the output: an optional one does not change it.
    flights = specs["SkyScrapperFlightSearch"]
    given = {"originSkyId": "LOND", "destinationSkyId": "NYCA", "originEntityId": "1",
             "destinationEntityId": "2", "date": "2024-08-15"}
    assert simulate(flights, {**given, "currency": "EUR"}, 0) == simulate(flights, given, 0)


def test_status_verdicts(tmp_path: Path) -> None:
    [task] = status.tasks(60_000)
    for arm in ("inline", "refs"):
        right = task.oracle(arm)
        assert isinstance(right, ScriptedModel)  # the demo's own script
        row = run_task(task, arm, Options(), TokenTally(), right, tmp_path / arm)
        assert row["verdict"] == "ok"

    def dropped(request: Request) -> dict[str, Any]:
        rows = [i for i in last_result(request)["items"] if i["status"] == "open"]
        return {"title": "Open items", "rows": rows[1:]}  # one row lost in the retyping

    steps = [call("export_work_items", {"project": "ATLAS"}), call("generate_pdf", dropped),
             say("Done.")]
    assert verdict(task, "inline", steps, tmp_path / "typo") == "wrong_arguments"
    bad = [call("export_work_items", {"project": "ATLAS"}),
           call("generate_pdf", {"title": "x", "rows": MALFORMED}), say("Done.")]
    assert verdict(task, "refs", bad, tmp_path / "bad") == "malformed_ref"
    wrong = [call("export_work_items", {"project": "ATLAS"}),
             call("delete_everything", {}), say("Done.")]
    assert verdict(task, "refs", wrong, tmp_path / "wrong") == "wrong_tool"


@pytest.fixture(scope="module")
def need() -> Task:
    directory = selection.default_catalog()
    if not directory.is_dir():
        pytest.skip(f"no MCP catalog at {directory} (shared/eval beside the repository)")
    return selection.tasks(directory)[0]  # refund a customer: create_refund


def test_selection_verdicts(need: Task, tmp_path: Path) -> None:
    for arm in ("direct", "search"):
        assert verdict(need, arm, oracle(need, arm), tmp_path / arm) == "ok"
    setup = need.build("direct", tmp_path)
    other = next(t.name for t in setup.tools if t.name not in setup.allowed)
    assert verdict(need, "direct", [call(other, {}), say("Done.")], tmp_path / "w") \
        == "wrong_tool"
    assert verdict(need, "direct", [call("create_refund", {"payment_intent": MALFORMED}),
                                    say("Done.")], tmp_path / "m") == "malformed_ref"
    assert verdict(need, "direct", [call("create_refund", {"payment_intent": 7}),
                                    say("Done.")], tmp_path / "a") == "wrong_arguments"
    never = [call("search_tools", {"query": "weather on mars"}), say("Nothing fits.")]
    assert verdict(need, "search", never, tmp_path / "s") == "gave_up"
    # Dispatch refuses unknown names as `bad-ref`; with no ref written that is no ref failure.
    unknown = [call("activate_tool", {"names": ["user_name"]}), say("Done.")]
    assert verdict(need, "search", unknown, tmp_path / "u") == "wrong_arguments"
