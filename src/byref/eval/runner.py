"""Running suites × arms × a model: one fresh setup and harness per (task, arm), metered.

The model is the scripted oracle (a fresh script per run), a provider model (one adapter for
the whole eval, each run metered on its own), or a recording played back. Each run's row holds
its verdict, turns, tokens in and out and the model's seconds; a replay takes tokens and seconds
from the recording, so the report of a replay is the report of the run it recorded.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from byref.eval.record import (
    BudgetExceeded,
    Metered,
    Replayed,
    TokenTally,
    read_turns,
    write_turns,
)
from byref.eval.scoring import verdict
from byref.eval.task import Task
from byref.events import Emitter, MemorySink
from byref.harness import Harness, Ledger, Limits, RunResult, ScriptedModel, StepLimitError
from byref.harness.messages import Model
from byref.store import Scope

ORACLE = "oracle"


@dataclass
class Options:
    """How to run: the model (`oracle` or a provider id), where to record or replay from."""

    model: str = ORACLE
    model_options: dict[str, Any] = field(default_factory=dict)
    record: Path | None = None
    replay: Path | None = None
    max_steps: int = 12


def run_task(task: Task, arm: str, options: Options, tally: TokenTally,
             provider: Model | None, scratch: Path) -> dict[str, Any]:
    """One (task, arm) run: its row of the report."""
    setup = task.build(arm, scratch)
    replayed: Replayed | None = None
    metered: Metered | None = None
    model: Model
    if options.replay is not None:
        where = f"{options.replay}/{task.suite}/{task.id}/{arm}.json"
        replayed = Replayed(read_turns(options.replay, task.suite, task.id, arm), where)
        model = replayed
    else:
        inner: Model
        if provider is not None:
            inner = provider
        else:
            script = task.oracle(arm)
            inner = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        model = metered = Metered(inner, tally)
    sink = MemorySink()
    harness = Harness(model, setup.tools, policy=setup.policy, code_mode=setup.code_mode,
                      discovery=setup.discovery, emit=Emitter(sink),
                      scope=Scope("eval", conversation=uuid.uuid4().hex),
                      limits=Limits(max_steps=options.max_steps))
    stopped = False
    try:
        harness.run_sync(task.prompt)
    except (StepLimitError, BudgetExceeded):
        stopped = True
    inputs = [part.value["input"] for message in harness.transcript for part in message.parts
              if part.type == "tool_call"]
    ledger = (Ledger.of(RunResult("", harness.requests, harness.transcript), tokens=False)
              if harness.requests else None)
    if metered is not None:
        turns = metered.turns
        if options.record is not None:
            write_turns(options.record, task.suite, task.id, arm, turns)
    else:
        assert replayed is not None
        turns = replayed.played
    return {
        "suite": task.suite, "task": task.id, "arm": arm, **task.params,
        "verdict": verdict(setup, sink.events, inputs, stopped=stopped),
        "turns": len(turns),
        "tokens_in": sum(int(t.get("tokens_in", 0)) for t in turns),
        "tokens_out": sum(int(t.get("tokens_out", 0)) for t in turns),
        "model_seconds": round(sum(float(t.get("seconds", 0)) for t in turns), 3),
        "read_chars": ledger.model_read_chars if ledger else 0,
        "written_chars": ledger.model_written_chars if ledger else 0,
        "peak_chars": ledger.peak_request_chars if ledger else 0,
        "counted": turns[0].get("counted", "provider") if turns else "",
    }


def run_eval(tasks: Sequence[Task], options: Options, *,
             arms: Sequence[str] | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every task in each of its arms (or those of `arms` it has): the rows and each suite's
    wall time (`timing`, the one part of the report a replay does not reproduce)."""
    provider: Model | None = None
    if options.replay is None and options.model != ORACLE:
        from byref.harness.providers import model_from_id

        provider = model_from_id(options.model, **options.model_options)
    tally = TokenTally()
    rows: list[dict[str, Any]] = []
    timing: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="byref-eval-") as tmp:
        for task in tasks:
            for arm in task.arms:
                if arms is not None and arm not in arms:
                    continue
                if progress is not None:
                    progress(f"{task.suite}/{task.id} [{arm}]")
                started = time.perf_counter()
                scratch = Path(tmp) / f"{task.suite}-{task.id}-{arm}"
                scratch.mkdir(parents=True)
                rows.append(run_task(task, arm, options, tally, provider, scratch))
                timing[task.suite] = timing.get(task.suite, 0.0) + time.perf_counter() - started
    model = f"replay of {options.replay}" if options.replay is not None else options.model
    return {"model": model, "rows": rows,
            "timing": {suite: round(s, 2) for suite, s in timing.items()}}
