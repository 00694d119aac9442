"""The one setting every bounded wait in the tests scales with (tests/_waits.py)."""

from __future__ import annotations

import pytest

import _waits


def test_the_setting_wins_and_ci_or_load_is_generous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYREF_TEST_WAIT_SCALE", "10")
    assert _waits._scale() == 10.0
    monkeypatch.delenv("BYREF_TEST_WAIT_SCALE")
    monkeypatch.setenv("CI", "true")
    assert _waits._scale() == 6.0
    monkeypatch.delenv("CI")
    assert _waits._scale() in (2.0, 6.0)  # 6 when this machine's load reaches its cores
    assert _waits.scaled(5) == 5 * _waits.SCALE


@pytest.mark.parametrize("said", ["fast", "0.5"])
def test_a_setting_that_would_shorten_waits_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                       said: str) -> None:
    monkeypatch.setenv("BYREF_TEST_WAIT_SCALE", said)
    with pytest.raises(ValueError, match=f"must be a number ≥ 1, got {said!r}"):
        _waits._scale()
