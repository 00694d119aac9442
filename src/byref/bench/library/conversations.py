"""`byref bench conversations`: what the conversation-state port costs a gateway call.

A gateway call appends two messages (the call and its result) and, with a state port, flushes
them as one batch. Measured per implementation, interleaved round by round with the baseline —
the same two appends to the gateway's former record, a spilled in-memory `Transcript` — and
printed as a ratio to it. Also: resuming a long conversation (open + read every line back, as a
working-set replay does) and the process RSS a long conversation adds (its lines live in the
state, so memory holds an index or nothing).
"""

from __future__ import annotations

import gc
import resource
import secrets
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from byref.conversations.lines import ConversationTranscript
from byref.conversations.open import open_state
from byref.store import Scope
from byref.transcript import Part, Transcript, fresh_origin

RESULT_CHARS = 1_500
"""A result as the gateway records a placed one: its substitute, ~1.5 KB."""


def _parts(i: int) -> tuple[list[Part], list[Part]]:
    cid = f"call_{i}"
    call = [Part(type="tool_call", value={"name": "files__read", "id": cid,
                                          "input": {"path": f"/data/{i}.json"}},
                 tool="files__read", call_id=cid)]
    result = [Part(type="tool_result", value={"preview": "x" * RESULT_CHARS, "bytes": 10 << 20},
                   tool="files__read", call_id=cid)]
    return call, result


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def bench_conversations(urls: dict[str, str], *, calls: int = 400, rounds: int = 5,
                        resume_messages: int = 2_000, long_calls: int = 5_000) -> dict[str, Any]:
    """Time each state in `urls` against the spilled in-memory transcript, interleaved over
    `rounds`: per-call cost, its ratio, resume time and RSS growth over a long session."""
    work = Path(tempfile.mkdtemp(prefix="byref-bench-conv-"))
    # Memory state spilled, as the gateway keeps it when nothing is durable.
    opened = {name: open_state(url.replace("{tmp}", str(work)), spill=work)
              for name, url in urls.items()}
    baseline = Transcript(origin=fresh_origin(), spill=work, cache=32)

    def base_call(i: int) -> None:
        call, result = _parts(i)
        baseline.append("assistant", call)
        baseline.append("tool", result)

    transcripts = {}
    for name, state in opened.items():
        scope = Scope("bench", "p", secrets.token_hex(6))
        transcripts[name] = ConversationTranscript(state, state.open(scope, fresh_origin()),
                                                   cache=32)

    def one(name: str, i: int) -> None:
        t = transcripts[name]
        call, result = _parts(i)
        t.append("assistant", call)
        t.append("tool", result)
        t.lines.flush()

    samples: dict[str, list[float]] = {"baseline": [], **{n: [] for n in opened}}
    i = 0
    for _ in range(rounds):  # interleaved: each round times every side over the same calls
        for side in samples:
            start = time.perf_counter()
            for k in range(calls):
                (base_call(i + k) if side == "baseline" else one(side, i + k))
            samples[side].append((time.perf_counter() - start) / calls)
        i += calls
    base = statistics.median(samples["baseline"])
    out: dict[str, Any] = {"calls": calls, "rounds": rounds, "baseline_us": base * 1e6,
                           "implementations": {}}
    for name, state in opened.items():
        per = statistics.median(samples[name])
        row: dict[str, Any] = {"per_call_us": per * 1e6, "ratio": per / base}
        # Resume: a new instance opens the record and reads every line, as a replay does.
        scope = Scope("bench", "p", secrets.token_hex(6))
        t = ConversationTranscript(state, state.open(scope, fresh_origin()), cache=32)
        for k in range(resume_messages // 2):
            call, result = _parts(k)
            t.append("assistant", call)
            t.append("tool", result)
            if k % 50 == 49:
                t.lines.flush()
        t.lines.flush()
        start = time.perf_counter()
        again = ConversationTranscript(state, state.open(scope, 0), cache=32)
        read = sum(1 for _ in again)
        row["resume_ms"] = (time.perf_counter() - start) * 1e3
        row["resume_messages"] = read
        # Memory: a long conversation's RSS growth in this process.
        gc.collect()
        before = _rss_mib()
        scope = Scope("bench", "p", secrets.token_hex(6))
        t = ConversationTranscript(state, state.open(scope, fresh_origin()), cache=32)
        for k in range(long_calls):
            call, result = _parts(k)
            t.append("assistant", call)
            t.append("tool", result)
            t.lines.flush()
        gc.collect()
        row["rss_before_mib"], row["rss_after_mib"] = before, _rss_mib()
        row["long_calls"] = long_calls
        out["implementations"][name] = row
    baseline.close()
    for state in opened.values():
        state.close()
    shutil.rmtree(work, ignore_errors=True)
    return out


def format_report(report: dict[str, Any]) -> str:
    """The report of `bench_conversations` as the lines the CLI prints."""
    lines = [f"conversation state per gateway call (2 appends + 1 flush), {report['calls']} calls "
             f"× {report['rounds']} interleaved rounds; baseline: the spilled in-memory "
             f"transcript, {report['baseline_us']:.1f} µs a call"]
    for name, row in report["implementations"].items():
        lines.append(
            f"  {name:9} {row['per_call_us']:8.1f} µs a call (×{row['ratio']:.2f}); resume "
            f"{row['resume_messages']:,} messages {row['resume_ms']:.1f} ms; RSS after "
            f"{row['long_calls']:,} calls {row['rss_before_mib']:.1f} → "
            f"{row['rss_after_mib']:.1f} MiB")
    return "\n".join(lines)
