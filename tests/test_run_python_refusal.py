"""Where no sandbox can be made, run_python refuses and says why, unless told isolation='none'."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from byref.events import Emitter, MemorySink
from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import MemoryStore
from byref.testing import result_text
from byref.tools.run_python.code import make_run_python_tool
from byref.tools.run_python.runner import Limits, StagingArea, SubprocessRunner
from byref.tools.run_python.sandbox import IsolationUnavailable, Sandbox
from byref.transcript import Part


def run(runner: SubprocessRunner, sink: MemorySink | None = None) -> Part:
    h = Harness(ScriptedModel([call("run_python", {"code": "print('ran')"}), say("x")]),
                [make_run_python_tool(runner=runner)], store=MemoryStore(),
                emit=Emitter(sink or MemorySink()))
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def refused_unshare(tmp_path: Path) -> Path:
    """An `unshare` that fails the way it does where the kernel refuses user namespaces."""
    tool = tmp_path / "unshare"
    tool.write_text(f"#!/bin/sh\necho probed >> {tmp_path / 'calls'}\n"
                    "echo 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n")
    tool.chmod(0o755)
    return tool


def test_a_missing_tool_is_a_refusal_naming_what_is_missing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "no-such-unshare"
    runner = SubprocessRunner(sandbox=Sandbox(bwrap=None, unshare=str(missing)))
    sink = MemorySink()
    with caplog.at_level(logging.WARNING, logger="byref.tools"):
        part = run(runner, sink)
        run(runner)
    assert part.is_error
    assert part.rendered == (
        "Tool 'run_python' cannot run code on this host: code runs only in an isolated "
        f"sandbox, and none can be made here ('{missing}' was not found). Answer without "
        "running code.")
    developer = (
        f"run_python cannot isolate code on this host: '{missing}' was not found. Install "
        "bubblewrap ('bwrap') or util-linux 'unshare' with user namespaces enabled, or, for "
        "trusted local use only, pass SubprocessRunner(isolation='none').")
    assert [r.getMessage() for r in caplog.records] == [developer]  # said once, not per call
    assert sink.named("refused")[-1].data["reason"] == "isolation-unavailable"
    with pytest.raises(IsolationUnavailable) as raised:
        runner.check()
    assert str(raised.value) == developer


def test_a_kernel_that_refuses_namespaces_is_found_by_trying_once(tmp_path: Path) -> None:
    tool = refused_unshare(tmp_path)
    runner = SubprocessRunner(sandbox=Sandbox(bwrap=None, unshare=str(tool)))
    first, second = run(runner), run(runner)
    assert first.rendered == second.rendered == (
        "Tool 'run_python' cannot run code on this host: code runs only in an isolated "
        f"sandbox, and none can be made here ('{tool}' could not make a sandbox (exit 1: "
        "'unshare: unshare failed: Operation not permitted')). Answer without running code.")
    assert (tmp_path / "calls").read_text() == "probed\n"  # the probe's answer is kept


def test_the_opt_out_runs_unisolated(tmp_path: Path) -> None:
    tool = refused_unshare(tmp_path)
    runner = SubprocessRunner(isolation="none", sandbox=Sandbox(bwrap=None, unshare=str(tool)))
    assert decode(result_text(run(runner)))["stdout"] == "ran\n"
    with StagingArea() as stage:
        assert runner.run("pass", stage, Limits()).isolation == "none"
    assert not (tmp_path / "calls").exists()  # nothing was even probed


def test_isolation_takes_only_the_two_words() -> None:
    with pytest.raises(ValueError) as raised:
        SubprocessRunner(isolation="off")  # type: ignore[arg-type]
    assert str(raised.value) == "isolation must be 'required' or 'none', not 'off'"
