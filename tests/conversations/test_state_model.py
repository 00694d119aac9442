"""A hypothesis model check of every implementation across two conversations: any sequence of
opens, appends (right and wrong seqs), reads, deletes, sweeps and idle time answers exactly as a
plain model of the port's law does, and the two conversations never see each other's lines."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _state_urls import IMPLEMENTATIONS, url_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _tiers import examples
from byref.conversations import SeqConflict, open_state
from byref.store import Scope
from doubles.clock import ManualClock

TTL = 100.0


@dataclass
class Model:
    origin: int
    lines: list[bytes] = field(default_factory=list)
    expires: float = 0.0
    expired: tuple[int, int] | None = None
    working_set: tuple[str, ...] = ()
    usage: list[tuple[str, str]] = field(default_factory=list)
    live: bool = True


def _expire(m: Model) -> None:
    if m.live and m.lines:
        first = m.expired[0] if m.expired else m.origin
        m.expired = (first, m.origin + len(m.lines) - 1)
    m.live, m.lines, m.working_set, m.usage = False, [], (), []


op = st.one_of(
    st.tuples(st.just("open"), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("append"), st.integers(0, 1), st.integers(0, 3), st.sampled_from(
        [0, 0, 0, 1, -1]), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 1), st.integers(-2, 12), st.integers(0, 6)),
    st.tuples(st.just("advance"), st.sampled_from([10.0, 60.0, 120.0])),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("delete"), st.integers(0, 1)),
)


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
def test_two_conversations_follow_the_model(kind: str, request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    clock = ManualClock()
    state = open_state(url_for(kind, request, tmp_path), ttl=TTL, clock=clock)

    @settings(max_examples=examples(60 if kind == "postgres" else 120), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(op, max_size=25))
    def run(ops: list[tuple[object, ...]]) -> None:
        token = secrets.token_hex(6)
        scopes = [Scope(f"model-{token}", "p", "Conv"), Scope(f"model-{token}", "p", "conv")]
        models: dict[int, Model] = {}

        def live(i: int) -> Model | None:
            m = models.get(i)
            if m is not None and m.live and m.expires <= clock.now:
                _expire(m)
            return m if m is not None and m.live else None

        for step in ops:
            name = step[0]
            if name == "open":
                i, origin = int(step[1]), int(step[2])  # type: ignore[call-overload]
                got = state.open(scopes[i], origin)
                m = live(i)
                if m is None:
                    old = models.get(i)
                    expired = old.expired if old is not None else None
                    start = origin if expired is None else max(origin, expired[1] + 1)
                    m = models[i] = Model(start, expired=expired)
                m.expires = clock.now + TTL
                assert (got.origin, got.length, got.expired, got.working_set, got.usage) == (
                    m.origin, len(m.lines), m.expired, m.working_set, len(m.usage))
            elif name == "append":
                i, n, off, ws = step[1], step[2], step[3], step[4]
                m = live(int(i))  # type: ignore[call-overload]
                nxt = (m.origin + len(m.lines)) if m is not None else 0
                first = nxt + int(off)  # type: ignore[call-overload]
                batch = [f"{scopes[int(i)].conversation}:{first + k}\n".encode()  # type: ignore[call-overload]
                         for k in range(int(n))]  # type: ignore[call-overload]
                names = [f"t{first}"] if ws else None
                pairs = [(f"q{first}", "t")] if ws else []
                ok = m is not None and off == 0
                try:
                    state.append(scopes[int(i)], first, batch, working_set=names,  # type: ignore[call-overload]
                                 usage=pairs)
                except SeqConflict:
                    assert not ok, f"append at the right seq {first} refused"
                else:
                    assert ok, f"append at {first} accepted (next is {nxt}, live={m is not None})"
                    assert m is not None
                    m.lines.extend(batch)
                    m.expires = clock.now + TTL
                    if names is not None:
                        m.working_set = tuple(names)
                    m.usage.extend(pairs)
            elif name == "read":
                i, rel, count = int(step[1]), int(step[2]), int(step[3])  # type: ignore[call-overload]
                m = live(i)
                if m is None:
                    assert state.lines(scopes[i], rel, count) == []
                    continue
                start = m.origin + rel
                want = m.lines[max(rel, 0):max(rel, 0) + count] if rel >= 0 else []
                assert state.lines(scopes[i], start, count) == want
            elif name == "advance":
                clock.now += float(step[1])  # type: ignore[arg-type]
            elif name == "sweep":
                state.sweep()  # the model expires lazily: both must answer alike after it
            elif name == "delete":
                i = int(step[1])  # type: ignore[call-overload]
                existed = i in models
                assert state.delete(scopes[i]) == existed
                models.pop(i, None)
            for i in (0, 1):
                m = live(i)
                found = state.find(scopes[i])
                if m is None:
                    assert found is None
                else:
                    assert found is not None and (found.origin, found.length, found.working_set,
                                                  found.usage) == (m.origin, len(m.lines),
                                                                   m.working_set, len(m.usage))
                    assert state.usage(scopes[i]) == m.usage

    try:
        run()
    finally:
        state.close()
