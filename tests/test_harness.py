"""The loop records what the model received; the scripted model reads what it was shown."""

from __future__ import annotations

import pytest

import byref
from byref.harness import (
    Harness,
    Ledger,
    Limits,
    ScriptedModel,
    ScriptExhaustedError,
    StepLimitError,
    call,
    say,
)
from byref.testing import result_text
from byref.tools import tool


@tool
def echo(text: str) -> str:
    """Echo text."""
    return text


def test_requests_are_recorded_and_byte_stable() -> None:
    h = Harness(ScriptedModel([call("echo", {"text": "hi"}), say("bye")]), [echo])
    run = h.run_sync("start")
    assert run.text == "bye" and run.steps == 2
    first, second = run.requests
    assert first.tools is second.tools
    assert first.system == second.system
    [shown] = [b.text for b in second.messages[-1].content]
    assert result_text(shown) == "hi"
    ledger = Ledger.of(run)
    assert ledger.model_read_chars == len("start") + len(shown)  # the ref line is read too
    assert ledger.model_written_chars == len('{"text":"hi"}') + len("bye")
    assert ledger.peak_request_chars == second.chars()


def test_script_exhaustion_and_step_limit_are_clear() -> None:
    with pytest.raises(ScriptExhaustedError, match="The script has 1 steps and all were played"):
        Harness(ScriptedModel([call("echo", {"text": "x"})]), [echo]).run_sync("go")
    looping = ScriptedModel([call("echo", {"text": "x"})] * 5)
    with pytest.raises(StepLimitError, match="still calling tools after 3 steps"):
        Harness(looping, [echo], limits=Limits(max_steps=3)).run_sync("go")


def test_duplicate_tool_names_are_a_developer_error() -> None:
    with pytest.raises(ValueError, match="Tool names must be unique; repeated: \\['echo'\\]"):
        Harness(ScriptedModel([]), [echo, echo])


def test_the_flat_keywords_of_the_last_release_still_work_and_say_where_they_went() -> None:
    looping = ScriptedModel([call("echo", {"text": str(i)}) for i in range(5)])
    with pytest.warns(DeprecationWarning, match=r"Harness\(max_steps=\.\.\.\) is deprecated .* "
                      r"pass limits=Limits\(max_steps=\.\.\.\) instead\."):
        h = Harness(looping, [echo], max_steps=3)
    assert h.max_steps == 3
    with pytest.warns(DeprecationWarning, match=r"hosting=Hosting\(hooks=Hooks\(unknown_tool"):
        session = byref.Session([], unknown_tool=lambda name: "starting")
    assert session.dispatcher.unknown_tool is not None
