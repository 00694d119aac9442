"""Versioned results, opt-in reuse, and the three limits."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from byref.dispatch import AUTO_INSERT_BYTES, Policy
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.reads import AUTO_INSERT_BYTES as READS_AUTO_INSERT_BYTES
from byref.reads import (
    EXPLICIT_READ_BYTES,
    ReadLimits,
    ResultVersionError,
    ResultVersions,
    read_budget,
)
from byref.store import MemoryStore, Scope
from byref.tools import tool
from byref.tools.readers.read_result import read_result

SCOPE = Scope("acme", "ana", "research-1")


def rig(**kw: Any) -> tuple[ResultVersions, MemoryStore]:
    store = MemoryStore()
    ticks = itertools.count(1_000)
    return ResultVersions(store, SCOPE, clock=lambda: float(next(ticks)), **kw), store


def test_a_refresh_makes_a_new_version_and_the_old_one_still_reads_exactly() -> None:
    versions, _ = rig()
    first = versions.keep("fetch_holdings", {"account": "A"}, [{"id": 1, "amount": 10}])
    refreshed = versions.refresh(first, lambda: [{"id": 1, "amount": 99}])
    assert refreshed.version is not None and not refreshed.failed
    second = refreshed.version
    assert (second.number, second.previous, second.series) == (2, first.ref, first.series)
    assert second.ref != first.ref and second.acquired_at > first.acquired_at
    assert versions.read(first.ref) == [{"id": 1, "amount": 10}]
    assert versions.read(second.ref) == [{"id": 1, "amount": 99}]
    assert versions.latest("fetch_holdings", {"account": "A"}) == second


def test_a_failed_refresh_records_the_failure_and_keeps_the_old_identity() -> None:
    versions, store = rig()
    first = versions.keep("fetch_holdings", {"account": "A"}, [{"id": 1}])

    def down() -> Any:
        raise RuntimeError("upstream down")

    outcome = versions.refresh(first, down)
    assert (outcome.failed, outcome.version, outcome.error) == (
        True, first, "RuntimeError: upstream down")
    assert outcome.failure_ref is not None
    failure = store.head(SCOPE, outcome.failure_ref)
    assert failure is not None and failure.kind == "result-failure/fetch_holdings"
    assert failure.metadata["byref.failure"]["kept"] == first.ref
    assert versions.latest("fetch_holdings", {"account": "A"}) == first


def test_an_exact_version_read_never_refetches() -> None:
    versions, store = rig()
    fetches = []
    first = versions.fetch("fetch_holdings", {}, lambda: fetches.append(1) or [{"id": 1}])
    store.delete(SCOPE, first.ref)
    with pytest.raises(ResultVersionError) as err:
        versions.read(first.ref)
    assert str(err.value) == (
        f"Result version {first.ref!r} is not available (missing, expired, or not a kept "
        "result in this scope). It was not refetched: an exact version is only ever read as "
        "stored. Fetch again with the tool to get a new version."
    )
    assert fetches == [1]


def test_reuse_is_opt_in_and_matches_tool_arguments_and_scope() -> None:
    versions, store = rig()
    calls: list[str] = []

    def fetcher(tag: str) -> Any:
        return lambda: calls.append(tag) or [{"tag": tag}]

    a = versions.fetch("fetch_holdings", {"account": "A", "as_of": 1}, fetcher("a"))
    again = versions.fetch("fetch_holdings", {"account": "A", "as_of": 1}, fetcher("b"))
    assert again.ref != a.ref  # no opt-in: fetched again
    reused = versions.fetch("fetch_holdings", {"as_of": 1, "account": "A"}, fetcher("c"),
                            reuse=True)
    assert reused == again  # argument order does not matter; the latest version answers
    other_args = versions.fetch("fetch_holdings", {"account": "B", "as_of": 1}, fetcher("d"),
                                reuse=True)
    other_tool = versions.fetch("fetch_prices", {"account": "A", "as_of": 1}, fetcher("e"),
                                reuse=True)
    other_scope = ResultVersions(store, Scope("acme", "bob", "research-1")).fetch(
        "fetch_holdings", {"account": "A", "as_of": 1}, fetcher("f"), reuse=True)
    assert calls == ["a", "b", "d", "e", "f"]
    assert len({other_args.ref, other_tool.ref, other_scope.ref, a.ref}) == 4


def test_storage_capacity_refuses_an_oversized_result_instead_of_cutting_it() -> None:
    versions, store = rig(limits=ReadLimits(storage_bytes=100))
    with pytest.raises(ResultVersionError) as err:
        versions.keep("fetch_holdings", {}, ["x" * 200])
    assert str(err.value) == (
        "The result of 'fetch_holdings' is 204 bytes, over the storage capacity of 100 bytes "
        "per result; nothing was kept. Ask the tool for less (a narrower query or a page), or "
        "raise ReadLimits.storage_bytes."
    )
    assert list(store.list(SCOPE)) == []


def test_the_three_limits_are_separate_dials_with_the_documented_defaults() -> None:
    limits = ReadLimits()
    assert READS_AUTO_INSERT_BYTES == AUTO_INSERT_BYTES == limits.auto_insert_bytes == 24 * 1024
    assert limits.explicit_read_bytes == EXPLICIT_READ_BYTES == 128 * 1024
    assert read_budget(limits, None, None, 0).limited_by == "explicit_read"
    assert read_budget(limits, 1_000, None, 0) == read_budget(limits, 1_000, 5_000, 100)
    assert read_budget(limits, None, 5_000, 100).bytes == 4_900
    h = Harness(ScriptedModel([]), [], policy=Policy(auto_insert_bytes=8_000))
    assert h.read_limits.auto_insert_bytes == 8_000  # one automatic-insertion dial
    with pytest.raises(ValueError) as err:
        ReadLimits(explicit_read_bytes=0)
    assert str(err.value) == "ReadLimits.explicit_read_bytes must be a positive integer, got 0"


@tool
def export_rows() -> list[dict[str, Any]]:
    """Export every row."""
    return [{"id": i, "memo": f"row {i} " + "m" * 80} for i in range(800)]


def test_not_inserted_automatically_never_means_cannot_be_read() -> None:
    steps = [
        call("export_rows", {}),
        call("read_result", lambda r: {"ref": last_result(r)["value"]}),
        say("done"),
    ]
    run = Harness(ScriptedModel(steps), [export_rows, read_result]).run_sync("export")
    placed = last_result(run.requests[1])
    assert placed["placed"] is True and placed["bytes"] > AUTO_INSERT_BYTES  # not inserted
    answer = last_result(run.requests[2])
    text = run.requests[2].messages[-1].content[-1].text
    assert len(text.encode()) > AUTO_INSERT_BYTES  # ...but read explicitly, inline, in full
    assert answer["coverage"]["inputComplete"] is True and answer["coverage"]["loaded"] == 800
    assert answer["source"]["kind"] == "tool-result/export_rows"
