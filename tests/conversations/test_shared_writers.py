"""Shared writers (`ConversationTranscript(shared=True)`, the replica mode): two processes
appending to one conversation in SQLite or PostgreSQL at once never hold the same seq, every
message lands at the seq its writer was given, and each writer reads the other's messages."""

from __future__ import annotations

import multiprocessing
import queue
import secrets
from pathlib import Path
from typing import Any

import pytest
from _state_urls import url_for

from _waits import scaled
from byref.conversations import ConversationTranscript, open_state
from byref.store import Scope
from byref.transcript import Part

COUNT = 40


def _writer(url: str, scope: Scope, who: int, barrier: Any, out: Any) -> None:
    state = open_state(url)
    transcript = ConversationTranscript(state, state.open(scope, 0), shared=True)
    barrier.wait(60)
    got = []
    for i in range(COUNT):
        message = transcript.append("tool", [Part(type="text", value=f"writer {who} #{i}")])
        got.append((message.seq, f"writer {who} #{i}"))
    # Every message of the other writer that exists by now answers here too.
    last = state.find(scope)
    assert last is not None
    seen = [transcript.field(s, 0, None) for s in range(last.origin, last.next_seq)]
    out.put((who, got, len(seen)))
    state.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_share_one_record(kind: str, request: pytest.FixtureRequest,
                                        tmp_path: Path) -> None:
    url = url_for(kind, request, tmp_path)
    scope = Scope("shared", "p", secrets.token_hex(6))
    open_state(url).open(scope, 1_000)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, scope, who, barrier, out))
             for who in (1, 2)]
    for proc in procs:
        proc.start()
    try:
        results = [out.get(timeout=scaled(120)) for _ in procs]
    except queue.Empty:
        pytest.fail("a writer process reported nothing in time")
    finally:
        for proc in procs:
            proc.join(60)
    assert all(proc.exitcode == 0 for proc in procs)
    given = {seq: text for _who, got, _seen in results for seq, text in got}
    assert len(given) == 2 * COUNT  # no seq handed to both writers
    assert sorted(given) == list(range(1_000, 1_000 + 2 * COUNT))  # contiguous
    state = open_state(url)
    reader = ConversationTranscript(state, state.open(scope, 0))
    for seq, text in given.items():
        assert reader.field(seq, 0, None) == text  # each landed where its writer was told
    assert all(seen >= COUNT for _who, _got, seen in results)
    state.close()


def test_a_shared_reader_sees_another_writers_message(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    scope = Scope("shared", "p", "c")
    a_state, b_state = open_state(url), open_state(url)
    a = ConversationTranscript(a_state, a_state.open(scope, 10), shared=True)
    b = ConversationTranscript(b_state, b_state.open(scope, 10), shared=True)
    first = a.append("user", [Part(type="text", value="from a")])
    second = b.append("user", [Part(type="text", value="from b")])
    assert (first.seq, second.seq) == (10, 11)
    assert a.field(11, 0, None) == "from b"  # past a's known end: it learns the length
    assert b.field(10, 0, None) == "from a"
    a_state.close()
    b_state.close()
