"""The store benchmark: put/get throughput per adapter and payload size, and the peak memory of a
streamed put and get, each against a baseline measured in the same run.

Owns the figures `byref bench store` prints. The law: every throughput is reported beside its
ratio to the baseline (plain file write / read of the same bytes on the same disk, same run); a
store that holds payloads in process memory moves no bytes, so it reports µs per operation, as a
ratio to the file store's in the same run, never MB/s; and
the streamed figure is the growth of a fresh child process's peak RSS while 1 GB passes through,
which must stay flat (a few chunks, never the payload). `get_stream` of a digested artifact is
timed beside the same read of an undigested one, same store, same run, as a ratio: what verifying
the digest on the streaming path costs. A SQLite store also runs a delete-heavy workload twice,
on a file as SQLite alone leaves it and on one that gives space back (`sqlite_file`): free pages,
file size and the workload's time, before and after, same run.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from byref.store.open import open_store
from byref.store.port import PutOptions, Scope, can_get_stream, can_put_stream, mint_key

SIZES = {"1KB": 1 << 10, "1MB": 1 << 20, "100MB": 100 << 20}
ROUNDS = {"1KB": 300, "1MB": 30, "100MB": 2}
OPTS = PutOptions(kind="bench/bytes")
CHILD_TIMEOUT = 900.0


def _timed(fn: Callable[[], object], rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        fn()
    return time.perf_counter() - started


def _mb_s(nbytes: int, rounds: int, seconds: float) -> float:
    return round(nbytes * rounds / max(seconds, 1e-9) / 1e6, 1)


def baseline(workdir: Path) -> dict[str, dict[str, float]]:
    """Plain write_bytes / read_bytes of the same payloads: what a disk gives with no store."""
    out = {}
    for label, size in SIZES.items():
        data, rounds, path = os.urandom(size), ROUNDS[label], workdir / "baseline.bin"
        put = _timed(lambda: path.write_bytes(data), rounds)  # noqa: B023
        get = _timed(path.read_bytes, rounds)
        out[label] = {"put_mb_s": _mb_s(size, rounds, put), "get_mb_s": _mb_s(size, rounds, get)}
        path.unlink()
    return out


def in_memory(url: str) -> bool:
    """The store holds payloads in this process's memory (no I/O to compare with a disk)."""
    return url.startswith("memory:")


def latency_vs(entry: dict[str, Any], reference: dict[str, Any]) -> dict[str, Any]:
    """Per size, this adapter's µs per put and get as a ratio to `reference`'s, same run."""
    out = {}
    for label, row in entry.items():
        ref = reference.get(label)
        if ref:
            out[label] = {"put": _sig(row["put_us"] / max(ref["put_us"], 1e-9)),
                          "get": _sig(row["get_us"] / max(ref["get_us"], 1e-9))}
    return out


def _sig(x: float) -> float:
    return float(f"{x:.3g}")  # three significant digits: these ratios span 1e-4 to 1


def throughput(url: str, base: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Put and get rates for each payload size against the store at `url`, with ratios against
    `base` (a baseline measured in the same run)."""
    store, scope = open_store(url), Scope("bench", "throughput", mint_key())
    out: dict[str, Any] = {}
    try:
        for label, size in SIZES.items():
            data, rounds, refs = os.urandom(size), ROUNDS[label], []
            put = _timed(lambda: refs.append(store.put(scope, data, OPTS).ref), rounds)  # noqa: B023
            it = iter(refs)
            get = _timed(lambda: store.get(scope, next(it)), rounds)  # noqa: B023
            for ref in refs:
                store.delete(scope, ref)
            row: dict[str, Any] = {
                "put_us": round(put / rounds * 1e6, 1), "get_us": round(get / rounds * 1e6, 1),
                "put_ops_s": round(rounds / put, 1), "get_ops_s": round(rounds / get, 1)}
            if in_memory(url):
                # put and get hand over a reference to the same bytes: bytes per second would
                # count a pointer as the payload, so only the per-operation cost is reported.
                row["by_reference"] = True
            else:
                put_mb_s, get_mb_s = _mb_s(size, rounds, put), _mb_s(size, rounds, get)
                row |= {
                    "put_mb_s": put_mb_s, "get_mb_s": get_mb_s,
                    "put_vs_baseline": round(put_mb_s / max(base[label]["put_mb_s"], 1e-9), 3),
                    "get_vs_baseline": round(get_mb_s / max(base[label]["get_mb_s"], 1e-9), 3)}
            out[label] = row
    finally:
        store.close()
    return out


def stream_digest_cost(url: str, nbytes: int = 64 << 20, rounds: int = 7) -> dict[str, Any]:
    """`get_stream` of a digested artifact against an undigested one of the same bytes: best of
    `rounds` each, read alternately so drift (cache, server load) hits both alike."""
    store, scope = open_store(url), Scope("bench", "stream-digest", mint_key())
    try:
        if not can_get_stream(store):
            return {"bytes": nbytes, "skipped": "this store has no get_stream"}
        data = os.urandom(nbytes)
        refs = {"plain": store.put(scope, data, OPTS).ref,
                "verified": store.put(scope, data, PutOptions(kind="bench/bytes", digest=True)).ref}
        best = {name: float("inf") for name in refs}
        for _ in range(rounds):
            for name, ref in refs.items():
                started = time.perf_counter()
                streamed = store.get_stream(scope, ref)
                assert streamed is not None
                seen = sum(len(c) for c in streamed.chunks)
                best[name] = min(best[name], time.perf_counter() - started)
                assert seen == nbytes
        for ref in refs.values():
            store.delete(scope, ref)
    finally:
        store.close()
    plain, verified = _mb_s(nbytes, 1, best["plain"]), _mb_s(nbytes, 1, best["verified"])
    return {"bytes": nbytes, "plain_mb_s": plain, "verified_mb_s": verified,
            "verified_vs_plain": round(verified / max(plain, 1e-9), 3)}


SPACE_SIZES = (4 << 10, 64 << 10, 1 << 20)
"""The delete-heavy workload's artifact sizes, put in turn."""


def space_after_deletes(url: str, n: int = 240) -> dict[str, Any]:
    """`n` puts cycling through `SPACE_SIZES`, then every one deleted but each tenth, on two new
    files beside the store at `url` (SQLite only): one as SQLite alone leaves it (space held),
    one giving space back. Free pages, file size and seconds for each, and the time's ratio."""
    from byref.store.adapters.sqlite import SqliteStore

    probe = open_store(url)
    where = getattr(probe, "path", None)
    probe.close()
    if not isinstance(probe, SqliteStore) or not isinstance(where, Path):
        return {"skipped": "not a SQLite store"}
    payloads = [os.urandom(size) for size in SPACE_SIZES]
    out: dict[str, Any] = {"puts": n, "deleted": n - len(range(0, n, 10))}
    for label, reclaim in (("held", False), ("given", True)):
        path = where.with_name(f"{where.stem}-space-{label}.db")
        store, scope = SqliteStore(path, reclaim=reclaim), Scope("bench", "space", mint_key())
        try:
            started = time.perf_counter()
            refs = [store.put(scope, payloads[i % len(payloads)], OPTS).ref for i in range(n)]
            for i, ref in enumerate(refs):
                if i % 10:
                    store.delete(scope, ref)
            seconds = time.perf_counter() - started
            space = store.space()
        finally:
            store.close()
            for extra in ("", "-wal", "-shm"):
                Path(f"{path}{extra}").unlink(missing_ok=True)
        out[label] = {"free_pages": space["free_pages"],
                      "file_mb": round(space["file_bytes"] / 1e6, 1),
                      "seconds": round(seconds, 3)}
    out["time_vs_held"] = round(out["given"]["seconds"] / max(out["held"]["seconds"], 1e-9), 3)
    return out


def _peak_kb() -> int:
    """This process's own peak RSS (VmHWM), which, unlike ru_maxrss, does not inherit the
    parent's high-water mark across fork and exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _peak_rss_child(url: str, nbytes: int, out: Any) -> None:
    store, scope = open_store(url), Scope("bench", "stream", mint_key())
    chunk = os.urandom(1 << 20)

    def chunks() -> Iterator[bytes]:
        left = nbytes
        while left > 0:
            yield chunk[: min(left, len(chunk))]
            left -= len(chunk)

    reader = store
    assert can_put_stream(store) and can_get_stream(reader)
    before = _peak_kb()
    started = time.perf_counter()
    meta = store.put_stream(scope, chunks(), nbytes, OPTS)
    mid = time.perf_counter()
    streamed = reader.get_stream(scope, meta.ref)
    assert streamed is not None
    seen = sum(len(c) for c in streamed.chunks)
    done = time.perf_counter()
    after = _peak_kb()
    store.delete(scope, meta.ref)
    store.close()
    out.put({"bytes": seen, "rss_before_mb": round(before / 1024, 1),
             "rss_peak_mb": round(after / 1024, 1),
             "rss_growth_mb": round((after - before) / 1024, 1),
             "put_mb_s": _mb_s(nbytes, 1, mid - started), "get_mb_s": _mb_s(nbytes, 1, done - mid)})


def streamed_peak_rss(url: str, nbytes: int) -> dict[str, Any]:
    """Stream `nbytes` in and out in a fresh process and report its peak-RSS growth."""
    probe = open_store(url)
    streams = can_put_stream(probe) and can_get_stream(probe)
    probe.close()
    if not streams or in_memory(url):
        return {"skipped": "this store holds payloads in process memory by design"}
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_peak_rss_child, args=(url, nbytes, out))
    proc.start()
    try:
        result: dict[str, Any] = out.get(timeout=CHILD_TIMEOUT)
    finally:
        proc.join(CHILD_TIMEOUT)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
    return result


def bench_store(
    urls: dict[str, str] | None = None, *, extra: dict[str, str] | None = None,
    stream_bytes: int = 1 << 30,
    workdir: str | Path | None = None, log: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Figures per adapter: throughput (µs and ops/s per operation; MB/s and its ratio to the
    baseline where bytes move) and streamed peak RSS.
    Without `urls`, memory, file and SQLite in a temporary directory, plus `extra`."""
    with tempfile.TemporaryDirectory(dir=workdir, prefix="byref-bench-") as tmp:
        root = Path(tmp)
        urls = urls or {"memory": "memory://", "file": f"file://{root / 'files'}",
                        "sqlite": f"sqlite:///{root / 'bench.db'}"}
        urls = {**urls, **(extra or {})}
        log("baseline")
        base = baseline(root)
        report: dict[str, Any] = {"baseline": base, "stream_bytes": stream_bytes, "adapters": {}}
        for name, url in urls.items():
            entry: dict[str, Any] = {}
            try:
                log(f"{name}: throughput")
                entry["throughput"] = throughput(url, base)
                log(f"{name}: streamed {stream_bytes:,} bytes")
                entry["streamed"] = streamed_peak_rss(url, stream_bytes)
                log(f"{name}: get_stream with and without digest")
                entry["stream_digest"] = stream_digest_cost(url)
                if url.startswith("sqlite:"):
                    log(f"{name}: space after a delete-heavy workload")
                    entry["space"] = space_after_deletes(url)
            except Exception as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"
            report["adapters"][name] = entry
        memory_vs_file(report["adapters"], urls)
        return report


def memory_vs_file(adapters: dict[str, Any], urls: dict[str, str]) -> None:
    """An in-memory store's latency as a ratio to the file store's (the embedded default, the
    store one would use instead), when both ran."""
    files = [n for n, u in urls.items() if u.startswith("file:") and "throughput" in adapters[n]]
    for name, url in urls.items():
        if in_memory(url) and files and "throughput" in adapters[name]:
            adapters[name]["latency_vs"] = {
                "adapter": files[0],
                "sizes": latency_vs(adapters[name]["throughput"],
                                    adapters[files[0]]["throughput"])}
