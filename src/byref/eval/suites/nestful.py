"""Nested calls: NESTFUL's executable set, its tools simulated (`nestful_sim`).

Each sample is a chain: a later call's arguments carry values from earlier results
(`$var1.skyId$`), and a last `var_result` names the results the user asked for; here that is
the `final_answer` tool, and success is its input being exactly the chain's values. In the
refs arm a value is a field ref (`{"$ref": {…, "field": "skyId"}}`); inline, it is retyped; in
code, a variable. Samples whose arguments compute from results (`100 * $var1.rate$`) are left
out: no arm passes a computed value by ref.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from byref.dispatch import Policy
from byref.dispatch.outbound.reflines import copied, split
from byref.eval.suites.nestful_sim import (
    VAR,
    dataset,
    input_schema,
    lookup,
    referenced_paths,
    simulate,
    tool_name,
)
from byref.eval.task import ARMS, Setup, Task
from byref.harness.messages import Request
from byref.harness.scripted import Step, call, say
from byref.jsonview import decode
from byref.tools import BUILTIN_JSON_TOOLS

FINAL = "final_answer"
DISTRACTORS = 3


def usable(sample: dict[str, Any]) -> bool:
    """Every argument is a literal or one whole `$varN…$` reference."""
    def plain(value: Any) -> bool:
        if isinstance(value, str):
            return "$" not in value or VAR.match(value) is not None
        if isinstance(value, list | dict):
            return "$" not in str(value)
        return True

    return all(plain(v) for c in sample["output"] for v in c["arguments"].values())


def tasks(seed: int = 0, limit: int | None = None) -> list[Task]:
    """One task per usable sample (the first `limit`)."""
    samples, specs = dataset()
    paths = referenced_paths(samples)
    out: list[Task] = []
    for index, sample in enumerate(samples):
        if usable(sample):
            out.append(_task(index, sample, specs, paths, seed))
    return out[:limit] if limit is not None else out


def _chain(sample: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    calls = [c for c in sample["output"] if c["name"] != "var_result"]
    [final] = [c for c in sample["output"] if c["name"] == "var_result"]
    return calls, final["arguments"]


def _resolve(value: Any, outputs: dict[str, Any]) -> Any:
    m = VAR.match(value) if isinstance(value, str) else None
    return lookup(outputs[m.group(1)], m.group(2)) if m else value


def _task(index: int, sample: dict[str, Any], specs: dict[str, dict[str, Any]],
          paths: dict[str, set[str]], seed: int) -> Task:
    calls, final_args = _chain(sample)
    outputs: dict[str, Any] = {}
    for c in calls:  # the gold chain, run in the simulator: what the final call must get
        args = {k: _resolve(v, outputs) for k, v in c["arguments"].items()}
        outputs[c["label"]] = simulate(specs[c["name"]], args, seed, paths.get(c["name"], ()))
    expected = {k: _resolve(v, outputs) for k, v in final_args.items()}
    used = sorted({c["name"] for c in calls})
    others = sorted(n for n in specs if n not in used)
    distractors = random.Random(f"nestful-{index}-{seed}").sample(others, DISTRACTORS)
    keys = ", ".join(map(repr, final_args))
    prompt = (f"{sample['input']}\nWhen you have the results, call {FINAL} with {keys}, each "
              "set to the tool result it names.")

    def build(arm: str, _: Path) -> Setup:
        setup = Setup([], frozenset({FINAL}), expected,
                      frozenset({*map(tool_name, used), FINAL}),
                      policy=Policy.naive() if arm == "inline" else None,
                      code_mode=arm == "code")
        for name in sorted({*used, *distractors}):
            spec = specs[name]
            setup.tools.append(setup.tool(tool_name(name), str(spec["description"]),
                                          input_schema(spec), _simulated(spec, seed, paths)))
        setup.tools.append(setup.tool(
            FINAL, "Hand the user the results they asked for.",
            {"type": "object", "properties": {k: {"description": f"the {k}"}
                                              for k in final_args},
             "required": list(final_args)},
            lambda _: "Delivered."))
        # The readers are byref's own: declared by the harness once a result is stored.
        setup.allowed = setup.allowed | {t.name for t in BUILTIN_JSON_TOOLS}
        return setup

    return Task("nestful", f"sample-{index:02d}", prompt, ARMS, build,
                lambda arm: _oracle(arm, calls, final_args),
                {"calls": len(calls)})


def _simulated(spec: dict[str, Any], seed: int, paths: dict[str, set[str]]
               ) -> Callable[[dict[str, Any]], Any]:
    return lambda given: simulate(spec, given, seed, paths.get(spec["name"], ()))


def _results(request: Request) -> list[tuple[Any, dict[str, Any] | None]]:
    """Every tool result the model was shown, in order: its value and its ref."""
    out: list[tuple[Any, dict[str, Any] | None]] = []
    for message in request.messages:
        for block in message.content:
            if block.type == "tool_result":
                body, line = split(block.text)
                ref = copied(line) if line else None
                try:
                    value = decode(body)
                except Exception:
                    value = body
                if ref is None and isinstance(value, dict) and isinstance(value.get("value"),
                                                                          dict):
                    ref = value["value"]  # a stored result: its preview's ref to the whole
                out.append((value, ref))
    return out


def _oracle(arm: str, calls: Sequence[dict[str, Any]], final_args: dict[str, Any]
            ) -> list[Step]:
    order = {c["label"]: i for i, c in enumerate(calls)}
    if arm == "code":
        lines = [f"{c['label']} = tools.{tool_name(c['name'])}("
                 + ", ".join(f"{k}={_expression(v)}" for k, v in c["arguments"].items()) + ")"
                 for c in calls]
        lines.append(f"tools.{FINAL}(" + ", ".join(f"{k}={_expression(v)}"
                                                   for k, v in final_args.items()) + ")")
        return [call("run_code", {"code": "\n".join(lines) + "\n"}), say("Done.")]

    def arguments(given: dict[str, Any]) -> Any:
        def make(request: Request) -> dict[str, Any]:
            shown = _results(request)
            args: dict[str, Any] = {}
            for k, v in given.items():
                m = VAR.match(v) if isinstance(v, str) else None
                if m is None:
                    args[k] = v
                    continue
                value, ref = shown[order[m.group(1)]]
                if arm == "inline":
                    args[k] = lookup(value, m.group(2))
                else:
                    assert ref is not None and "$ref" in ref, "a result without its ref"
                    field = ".".join(str(p) for p in _parts(m.group(2))) if m.group(2) else ""
                    target = ref["$ref"]
                    if isinstance(target, str):  # a handle: its field rides after a dot
                        args[k] = {"$ref": f"{target}.{field}" if field else target}
                    else:
                        args[k] = {"$ref": {**target, "field": field} if field else target}
            return args
        return make

    steps: list[Step] = [call(tool_name(c["name"]), arguments(c["arguments"])) for c in calls]
    return [*steps, call(FINAL, arguments(final_args)), say("Done.")]


def _parts(path: str) -> list[str | int]:
    from byref.eval.suites.nestful_sim import path_parts

    return path_parts(path)


def _expression(value: Any) -> str:
    """A literal or a `$varN.a[0].b$` as Python in the oracle's program."""
    m = VAR.match(value) if isinstance(value, str) else None
    if m is None:
        return repr(value)
    return m.group(1) + "".join(f"[{p!r}]" for p in _parts(m.group(2) or ""))
