"""`byref bench run-python`: what a trivial run_python call costs, and what the sandbox adds.

The law: three ways to run `print(1)` are measured interleaved, round by round, in one run —
the bare interpreter start every run pays (`python -I -c`), the tool through the unisolated
runner (staging, the init, output collection), the tool in its sandbox (namespaces, the run's
tmpfs, the syscall filter), and the tool in a warm sandbox (started ahead, its interpreter up;
the bench waits, untimed, until one is ready) — and each is printed as its median in ms beside
its ratio to the bare start. Where no sandbox can be made, that line says why instead.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from byref.harness import Harness, ScriptedModel, call, say
from byref.store import MemoryStore
from byref.tools.run_python.code import make_run_python_tool
from byref.tools.run_python.runner import SubprocessRunner
from byref.tools.run_python.sandbox import IsolationUnavailable


def _tool_call(runner: SubprocessRunner) -> Callable[[], None]:
    tool = make_run_python_tool(runner=runner)
    pool = runner.pool

    def once() -> None:
        h = Harness(ScriptedModel([call("run_python", {"code": "print(1)"}), say("x")]), [tool],
                    store=MemoryStore())
        h.run_sync("go")
        part = [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]
        if part.is_error:
            raise RuntimeError(f"the trivial run was refused: {part.rendered}")

    if pool is None:
        return once
    ready = [False]

    def warm() -> None:
        if not ready[0]:
            raise RuntimeError("no warm sandbox was ready")
        once()

    def before() -> None:  # untimed, as a model's turn gives the pool time to refill
        ready[0] = pool.wait_for(lambda: pool.ready() >= 1, 120)

    warm.before = before  # type: ignore[attr-defined]
    return warm


def _bare() -> None:
    subprocess.run([sys.executable, "-I", "-c", "print(1)"], check=True, capture_output=True)


def bench_run_python(rounds: int = 20) -> dict[str, Any]:
    """Median ms per trivial call for each way, and its ratio to the bare interpreter start."""
    ways: dict[str, Callable[[], None]] = {"bare interpreter": _bare,
                                           "unisolated": _tool_call(SubprocessRunner(
                                               isolation="none"))}
    report: dict[str, Any] = {"rounds": rounds, "ways": {}}
    sandboxed = SubprocessRunner()
    try:
        sandboxed.check()
        ways["sandboxed"] = _tool_call(sandboxed)
        ways["sandboxed, warm"] = _tool_call(SubprocessRunner(warm=1))
        report["isolation"] = sandboxed.sandbox.backend(sandboxed.python)[0]
        report["unenforced"] = sandboxed.unenforced()
    except IsolationUnavailable as exc:
        report["sandboxed"] = f"no sandbox here: {exc.reason}"
    times: dict[str, list[float]] = {name: [] for name in ways}
    for round_ in range(rounds + 1):
        for name, fn in ways.items():
            before = getattr(fn, "before", None)
            if before is not None:
                before()
            started = time.perf_counter()
            fn()
            if round_:  # the first round warms caches and the sandbox probe
                times[name].append((time.perf_counter() - started) * 1000)
    base = statistics.median(times["bare interpreter"])
    for name, got in times.items():
        median = statistics.median(got)
        report["ways"][name] = {"median_ms": round(median, 1), "ratio": round(median / base, 2)}
    return report


def format_report(report: dict[str, Any]) -> str:
    """The report as lines for a terminal."""
    lines = [f"run_python, trivial call (median of {report['rounds']}, interleaved):"]
    for name, got in report["ways"].items():
        lines.append(f"  {name:<17} {got['median_ms']:>8.1f} ms  ×{got['ratio']:.2f}")
    if "sandboxed" in report:
        lines.append(f"  sandboxed: {report['sandboxed']}")
    else:
        lines.append(f"  sandbox: {report['isolation']}; per process only: "
                     f"{'; '.join(report['unenforced']) or 'nothing'}")
    return "\n".join(lines)
