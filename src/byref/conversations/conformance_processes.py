"""The battery's cases that need a second process: two writers of one record, numbered writers,
holds, and a writer killed with SIGKILL mid-write (declared for state that lives in one process).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import threading
from collections.abc import Callable
from typing import Any

from byref.battery import PROCESS_TIMEOUT, CaseFailed, check, equal, reap
from byref.conversations.conformance_kit import Kit, conflicts_busy, line
from byref.conversations.port import ConversationBusy, ConversationState, SeqConflict
from byref.store import Scope


def _writer(opener: Callable[[], ConversationState], scope: Scope, who: int, count: int,
            barrier: Any, out: Any) -> None:
    state = opener()
    barrier.wait(PROCESS_TIMEOUT)
    wrote = 0
    while wrote < count:
        conv = state.find(scope)
        assert conv is not None
        try:
            state.append(scope, conv.next_seq,
                         [f"writer {who} line {wrote}\n".encode()], usage=[(str(who), "t")])
        except SeqConflict:
            continue  # the other writer was first: read where the record is now and retry
        wrote += 1
    state.close()
    out.put(who)


def _two_writers(target: Callable[..., None], opener: Callable[[], ConversationState],
                 scope: Scope, count: int) -> list[Any]:
    """Run `target(opener, scope, who, count, barrier, out)` as writers 1 and 2 in spawned
    processes released together; what each put on `out`, in the order they reported."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=target, args=(opener, scope, who, count, barrier, out))
             for who in (1, 2)]
    for proc in procs:
        proc.start()
    try:
        return [out.get(timeout=PROCESS_TIMEOUT) for _ in procs]
    except queue.Empty:
        raise CaseFailed("a writer process reported nothing in time") from None
    finally:
        reap(procs)


def two_writers(kit: Kit) -> None:
    """Two processes continuing one record lose nothing and mix nothing up (the loser of a race
    retries)."""
    opener, scope, count = kit.opener(), kit.scope(), 30
    kit.state.open(scope, 0)
    done = sorted(_two_writers(_writer, opener, scope, count))
    equal(done, [1, 2], "writers that finished")
    got = kit.state.lines(scope, 0, 1_000)
    want = {f"writer {w} line {i}\n".encode() for w in (1, 2) for i in range(count)}
    equal(len(got), 2 * count, "lines written by two processes")
    equal(set(got), want, "the lines two processes wrote, each once")
    for who in (1, 2):  # each writer's lines in its own order
        mine = [x for x in got if x.startswith(f"writer {who} ".encode())]
        equal(mine, [f"writer {who} line {i}\n".encode() for i in range(count)], "order")
    equal(len(kit.state.usage(scope)), 2 * count, "usage pairs written with the lines")


def _numberer(opener: Callable[[], ConversationState], scope: Scope, who: int, count: int,
              barrier: Any, out: Any) -> None:
    state = opener()
    barrier.wait(PROCESS_TIMEOUT)
    seqs = [state.append_numbered(scope, f"writer {who} seq ".encode(), b"\n")
            for _ in range(count)]
    state.close()
    out.put((who, seqs))


def numbered_writers(kit: Kit) -> None:
    """Two processes appending numbered lines to one record at once: every line lands, at the
    seq its writer was told (written in it), no seq twice, none skipped."""
    opener, scope, count = kit.opener(), kit.scope(), 40
    kit.state.open(scope, 0)
    told = dict(_two_writers(_numberer, opener, scope, count))
    equal(sorted(told[1] + told[2]), list(range(2 * count)), "the seqs the writers were told")
    for who in (1, 2):
        equal(told[who], sorted(told[who]), f"writer {who}'s seqs in its own order")
    got = kit.state.lines(scope, 0, 1_000)
    equal(got, [f"writer {1 if seq in told[1] else 2} seq {seq}\n".encode()
                for seq in range(2 * count)], "each line at the seq written in it")


def _holder(opener: Callable[[], ConversationState], scope: Scope, out: Any,
            keep: bool) -> None:
    state = opener()
    try:
        held = state.hold(scope)
    except ConversationBusy:
        out.put("busy")
        return
    out.put("held")
    if keep:  # held until killed
        threading.Event().wait(PROCESS_TIMEOUT)
    held.release()


def _try_hold(opener: Callable[[], ConversationState], scope: Scope, keep: bool = False
              ) -> tuple[str, multiprocessing.process.BaseProcess]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_holder, args=(opener, scope, out, keep))
    proc.start()
    try:
        return out.get(timeout=PROCESS_TIMEOUT), proc
    except queue.Empty:
        reap([proc])
        raise CaseFailed("a holding process reported nothing in time") from None


def holds(kit: Kit) -> None:
    """A held conversation is refused to another process (ConversationBusy) and to a second
    hold here; free again once released, and once its holder is killed with SIGKILL."""
    opener, scope, other = kit.opener(), kit.scope(), kit.scope("other")
    held = kit.state.hold(scope)
    check(conflicts_busy(lambda: kit.state.hold(scope)), "a second hold in this process")
    got, proc = _try_hold(opener, scope)
    reap([proc])
    equal(got, "busy", "another process while it is held")
    got, proc = _try_hold(opener, other)
    reap([proc])
    equal(got, "held", "another process, another conversation")
    held.release()
    held.release()  # idempotent
    got, proc = _try_hold(opener, scope, keep=True)
    try:
        equal(got, "held", "another process once released")
        check(conflicts_busy(lambda: kit.state.hold(scope)), "held by the other process")
    finally:
        if proc.pid is not None:
            os.kill(proc.pid, signal.SIGKILL)
        reap([proc])
    for _ in range(200):  # the server may take a moment to see the connection gone
        try:
            kit.state.hold(scope).release()
            return
        except ConversationBusy:
            threading.Event().wait(0.05)
    raise CaseFailed("still held 10 s after its holder was killed")


BATCH = 3
BIG = 300_000


def _crasher(opener: Callable[[], ConversationState], scope: Scope, out: Any) -> None:
    state = opener()
    conv = state.open(scope, 0)
    seq = conv.next_seq
    while True:
        state.append(scope, seq, [line(seq + i, BIG) for i in range(BATCH)],
                     working_set=[f"ws-{seq}"], usage=[(f"q{seq}", "t")])
        seq += BATCH
        out.put(seq)


def kill_mid_write(kit: Kit) -> None:
    """A writer killed with SIGKILL mid-write leaves whole batches only; nothing torn is ever read
    back, and the record continues."""
    opener, scope = kit.opener(), kit.scope()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_crasher, args=(opener, scope, out))
    proc.start()
    try:
        for _ in range(4):  # let it commit a few batches, then kill it mid-stream
            out.get(timeout=PROCESS_TIMEOUT)
        os.kill(proc.pid or 0, signal.SIGKILL)
    except queue.Empty:
        raise CaseFailed("the writer process reported nothing in time") from None
    finally:
        reap([proc])
    equal(proc.exitcode, -signal.SIGKILL, "exit code of the killed writer")
    survivor = opener()
    try:
        for state in (kit.state, survivor):
            conv = state.find(scope)
            check(conv is not None, "the conversation after a kill -9")
            assert conv is not None
            check(conv.length >= 4 * BATCH and conv.length % BATCH == 0,
                  f"length {conv.length} after kill -9: a batch was cut short")
            got = state.lines(scope, 0, conv.length + BATCH)
            equal(len(got), conv.length, "lines read back after kill -9")
            for seq, data in enumerate(got):
                check(data == line(seq, BIG), f"line {seq} read back torn or changed")
            equal(conv.working_set, (f"ws-{conv.length - BATCH}",), "working set of last batch")
            equal(len(state.usage(scope)), conv.length // BATCH, "usage pairs after kill -9")
        assert conv is not None
        survivor.append(scope, conv.length, [line(conv.length)])
        equal(kit.state.lines(scope, conv.length, 1), [line(conv.length)], "after the crash")
    finally:
        survivor.close()
