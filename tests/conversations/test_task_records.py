"""A hypothesis model check of every implementation's task records (`byref.conversations.tasks`):
any sequence of creates, finishes, questions, answers, takes, beats and idle time answers as a
plain model of the law does — a record is found by its id and owner only, a terminal status is
final (the first finish wins), retention is `ttl_ms` from creation, an answer takes its key off
the open questions (keys not open ignored) and waits for the runner's `take`."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _state_urls import IMPLEMENTATIONS, url_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.conversations import open_state
from byref.conversations.tasks import RUNNING, TaskRecord
from doubles.clock import ManualClock

TTL_MS = 100_000
KEYS = ("a", "b", "c")


@dataclass
class Model:
    owner: str
    runner: str
    created: float
    status: str = "working"
    inputs: dict[str, Any] = field(default_factory=dict)
    waiting: dict[str, Any] = field(default_factory=dict)


op = st.one_of(
    st.tuples(st.just("create"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("finish"), st.integers(0, 2), st.sampled_from(
        ["completed", "failed", "cancelled"])),
    st.tuples(st.just("ask"), st.integers(0, 2), st.lists(st.sampled_from(KEYS), unique=True)),
    st.tuples(st.just("respond"), st.integers(0, 2), st.integers(0, 1),
              st.dictionaries(st.sampled_from((*KEYS, "zz")), st.integers(0, 9), max_size=3)),
    st.tuples(st.just("take"), st.integers(0, 2)),
    st.tuples(st.just("beat"), st.integers(0, 1)),
    st.tuples(st.just("advance"), st.sampled_from([10.0, 60.0])),
    st.tuples(st.just("sweep")),
)


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_task_records_follow_the_model(kind: str, request: pytest.FixtureRequest,
                                       tmp_path: Path) -> None:
    clock = ManualClock()
    state = open_state(url_for(kind, request, tmp_path), clock=clock)
    records = state.tasks

    @settings(max_examples=examples(50 if kind == "postgres" else 100), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(op, max_size=25))
    def run(ops: list[tuple[Any, ...]]) -> None:
        token = secrets.token_hex(6)
        ids = [f"task-{token}-{i}" for i in range(3)]
        owners = [f"owner-{token}-0", f"owner-{token}-1"]
        runners = [f"host:1:{token}", f"host:2:{token}"]
        models: dict[int, Model] = {}

        def live(i: int) -> Model | None:
            m = models.get(i)
            if m is not None and clock.now > m.created + TTL_MS / 1000:
                return None
            return m

        for step in ops:
            name, i = step[0], step[1] if len(step) > 1 else 0
            m = live(i) if name not in ("beat", "advance", "sweep") else None
            if name == "create":
                if i in models:
                    continue  # ids are fresh
                owner, runner = owners[step[2]], runners[step[2]]
                records.create(TaskRecord(ids[i], owner, "working", clock.now, clock.now,
                                          TTL_MS, 100, runner, clock.now))
                models[i] = Model(owner, runner, clock.now)
            elif name == "finish":
                done = records.finish(ids[i], step[2], message="done")
                running = i in models and models[i].status in RUNNING
                assert done == running
                if running:
                    models[i].status = step[2]
            elif name == "ask":
                asked = records.ask(ids[i], json.dumps({k: {"q": k} for k in step[2]})
                                    if step[2] else None)
                running = i in models and models[i].status in RUNNING
                assert asked == running
                if running:
                    models[i].inputs = {k: {"q": k} for k in step[2]}
                    models[i].status = "input_required" if step[2] else "working"
            elif name == "respond":
                took = records.respond(ids[i], owners[step[2]], step[3])
                ok = m is not None and m.owner == owners[step[2]] and \
                    m.status == "input_required"
                assert took == ok
                if ok and m is not None:
                    for key, answer in step[3].items():
                        if key in m.inputs:
                            del m.inputs[key]
                            m.waiting[key] = answer
                    m.status = "input_required" if m.inputs else "working"
            elif name == "take":
                got = records.take(ids[i])
                want = models[i].waiting if i in models else {}
                assert got == want
                if i in models:
                    models[i].waiting = {}
            elif name == "beat":
                gone = records.beat(runners[i])
                want_gone = {ids[k] for k, mm in models.items()
                             if mm.runner == runners[i] and mm.status not in RUNNING}
                assert set(gone) >= {t for t in want_gone if live(ids.index(t)) is not None}
            elif name == "advance":
                clock.now += float(step[1])
            elif name == "sweep":
                records.sweep()
                for k in [k for k in models if live(k) is None]:
                    del models[k]
            for k in range(3):
                mm = live(k)
                for owner in owners:
                    found = records.get(ids[k], owner)
                    if mm is None or mm.owner != owner:
                        assert found is None, (k, owner, found)
                        continue
                    assert found is not None
                    assert found.status == mm.status
                    if mm.status == "input_required":
                        assert json.loads(found.inputs or "{}") == mm.inputs

    try:
        run()
    finally:
        state.close()


OLD_TABLE = ("CREATE TABLE {name} (task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, status TEXT NOT "
             "NULL, created_at REAL NOT NULL, updated_at REAL NOT NULL, ttl_ms BIGINT NOT NULL, "
             "poll_ms BIGINT NOT NULL, runner TEXT NOT NULL, beat_at REAL NOT NULL, result TEXT, "
             "error TEXT, message TEXT)")
"""The task table as its first release made it (before questions mid-task)."""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_task_table_of_the_first_release_gains_the_new_columns(
        kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url = url_for(kind, request, tmp_path)
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(tmp_path / "state.db") as conn:
            conn.execute(OLD_TABLE.format(name="byref_tasks"))
    else:
        import psycopg

        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute(OLD_TABLE.format(name=f'"{url.rsplit("table=", 1)[1]}_tasks"'))
    state = open_state(url)
    try:
        state.tasks.create(TaskRecord("old-table-task", "o", "working", 1.0, 1.0, 10**12, 100,
                                      "r", 1.0))
        assert state.tasks.ask("old-table-task", json.dumps({"a": {"q": 1}}))
        assert state.tasks.respond("old-table-task", "o", {"a": 2})
        assert state.tasks.take("old-table-task") == {"a": 2}
    finally:
        state.close()
