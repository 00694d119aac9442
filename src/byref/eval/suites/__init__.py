"""The eval's task suites, one module each: `nestful`, `corpus`, `status`, `selection`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from byref.errors import InvalidValue
from byref.eval.task import Task

SUITES = ("nestful", "corpus", "status", "selection")


@dataclass(frozen=True)
class Plan:
    """Which tasks: the suites, the first `limit` tasks of each, and each suite's knobs."""

    suites: tuple[str, ...] = SUITES
    limit: int | None = None
    sizes: tuple[int, ...] = (50, 500, 5000)
    export_size: int = 2_100_000
    catalog: Path | None = None
    seed: int = 0
    declared: int = 40


def load(plan: Plan) -> list[Task]:
    """The tasks `plan` names, suite by suite."""
    unknown = [s for s in plan.suites if s not in SUITES]
    if unknown:
        raise InvalidValue(f"Unknown suite {unknown[0]!r}; the suites are "
                           f"{', '.join(map(repr, SUITES))}.")
    out: list[Task] = []
    for suite in plan.suites:
        if suite == "nestful":
            from byref.eval.suites import nestful

            made = nestful.tasks(plan.seed)
        elif suite == "corpus":
            from byref.eval.suites import corpus

            made = corpus.tasks(plan.sizes, plan.seed)
        elif suite == "status":
            from byref.eval.suites import status

            made = status.tasks(plan.export_size)
        else:
            from byref.eval.suites import selection

            made = selection.tasks(plan.catalog, plan.declared)
        out += made[:plan.limit] if plan.limit is not None else made
    return out
