"""Bad input, each a clear error that names the fix: unknown URLs, unreachable servers, missing
extras, oversized and mis-declared payloads, damaged records, odd scopes. Plus the operator's
view: the event trace tells the true reason the caller is never given."""

from __future__ import annotations

import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from _waits import scaled
from byref.errors import install_hint
from byref.events import Emitter, MemorySink
from byref.store import (
    ArtifactIntegrityError,
    ArtifactSizeMismatchError,
    ArtifactTooLargeError,
    FileStore,
    PutOptions,
    Retention,
    Scope,
    StoreUnavailableError,
    StoreURLError,
    can_get_stream,
    can_put_stream,
    mint_key,
    open_store,
)

OPTS = PutOptions(kind="test/bytes")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://x", "Unknown store URL 'ftp://x'; use one of: memory://, file://DIR, "
                "sqlite:///PATH, postgresql://…, s3://bucket/prefix (for example file://.byref)."),
    ("sqlite://", "Store URL 'sqlite://' names no database file; write sqlite:///relative.db or "
                  "sqlite:////absolute/path.db (use memory:// for an in-process store)."),
    ("sqlite:///a.db?table=Bad-Name", "Store URL 'sqlite:///a.db?table=Bad-Name': "
     "table='Bad-Name' is not a plain lower-case SQL name; use letters, digits and underscores, "
     "starting with a letter."),
    ("memory://?ttl=soon", "Store URL 'memory://?ttl=soon': ttl='soon' is not a number; write "
                           "e.g. ttl=3600."),
    ("memory://?colour=red", "Store URL 'memory://?colour=red' has options this adapter does not "
                             "know: colour; accepted: ttl, max_bytes, max_count."),
    ("memory://?max_bytes=0", "Store URL 'memory://?max_bytes=0': Retention.max_bytes_per_scope "
                              "must be positive, got 0"),
    ("s3:///prefix", "Store URL 's3:///prefix' names no bucket; write s3://bucket/prefix."),
])
def test_bad_urls_name_the_fix(url: str, message: str) -> None:
    with pytest.raises(StoreURLError) as info:
        open_store(url)
    assert str(info.value) == message


def test_url_retention_options_apply() -> None:
    store = open_store("memory://?max_bytes=10&ttl=5")
    with pytest.raises(ArtifactTooLargeError, match=r"^A payload of 11 bytes exceeds this "
                       r"scope's ceiling of 10 bytes; raise Retention.max_bytes_per_scope"):
        store.put(Scope("t"), b"x" * 11, OPTS)
    meta = store.put(Scope("t"), b"x", OPTS)
    assert meta.expires_at == pytest.approx(meta.created_at + 5)


def test_unreachable_postgres_names_the_server_without_the_password() -> None:
    url = f"postgresql://root:hunter2@127.0.0.1:{free_port()}/test"
    with pytest.raises(StoreUnavailableError) as info:
        open_store(url)
    text = str(info.value)
    assert text.startswith("Cannot reach PostgreSQL at 'postgresql://root:***@127.0.0.1:")
    assert text.endswith("Start the server, or fix the host, port, user or database in the "
                         "store URL.")
    assert "hunter2" not in text


def test_unreachable_s3_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x")
    endpoint = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailableError) as info:
        open_store(f"s3://nowhere/p?endpoint={endpoint}&region=us-east-1")
    assert str(info.value).startswith(f"Cannot reach bucket 'nowhere' at {endpoint!r}: ")
    assert str(info.value).endswith("Check that the server is running, the bucket exists and "
                                    "the AWS credentials are set.")


@pytest.mark.parametrize(("module", "url", "hint"), [
    ("psycopg", "postgresql://root@127.0.0.1/test", install_hint("postgres")),
    ("obstore", "s3://bucket/p", install_hint("s3")),
])
def test_missing_extra_gives_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, module: str, url: str, hint: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(StoreUnavailableError, match=r"install it with: " + re.escape(hint)):
        open_store(url)


def test_scope_and_option_validation() -> None:
    with pytest.raises(ValueError, match=r"^Scope tenant must be a non-empty string, got ''$"):
        Scope("")
    with pytest.raises(ValueError, match=r"^Scope principal '\\ud800' is not valid Unicode"):
        Scope("t", "\ud800")
    with pytest.raises(ValueError, match=r"^PutOptions.kind must be a non-empty string"):
        PutOptions(kind="")
    with pytest.raises(ValueError, match=r"^PutOptions.ttl must be positive seconds, got 0$"):
        PutOptions(kind="k", ttl=0)


def test_mis_declared_streams_name_the_fix(store_url: str) -> None:
    store = open_store(store_url)
    assert can_put_stream(store)
    scope = Scope(f"mis-{mint_key()}")
    with pytest.raises(ArtifactSizeMismatchError) as short:
        store.put_stream(scope, [b"abc"], 5, OPTS)
    assert str(short.value) == ("Streamed payload declared 5 bytes but delivered 3; nothing was "
                                "stored. Pass the payload's exact size as declared_bytes.")
    with pytest.raises(ArtifactSizeMismatchError, match=r"delivered more than 2; nothing"):
        store.put_stream(scope, [b"abc"], 2, OPTS)
    assert list(store.list(scope)) == []
    store.close()


def test_bad_cursor_and_limit(store_url: str) -> None:
    store = open_store(store_url)
    with pytest.raises(ValueError, match=r"^Invalid list cursor 'zzz'; pass the next_cursor a "
                       r"previous page returned.$"):
        store.list(Scope("t"), cursor="zzz")
    with pytest.raises(ValueError, match=r"^list limit must be a positive number of items, "
                       r"got -1$"):
        store.list(Scope("t"), limit=-1)
    store.close()


def test_the_trace_tells_the_operator_what_the_caller_is_not_told(
    store_url: str,
) -> None:
    sink = MemorySink()
    clock = [1_000_000.0]
    store = open_store(store_url, emit=Emitter(sink, clock=lambda: clock[0]),
                       clock=lambda: clock[0],
                       retention=Retention(max_count_per_scope=2))
    mine, other = Scope(f"trace-{mint_key()}"), Scope(f"trace-{mint_key()}")
    secret = b"PAYLOAD-MUST-NOT-LEAK"
    doomed = store.put(mine, secret, PutOptions(kind="k", ttl=10))
    assert store.get(other, doomed.ref) is None
    clock[0] += 11
    assert store.get(mine, doomed.ref) is None
    first = store.put(mine, secret, OPTS)
    store.put(mine, secret, OPTS)
    third = store.put(mine, secret, OPTS)
    assert third.evicted == (first.ref,)
    names = [(e.name, e.data.get("cause")) for e in sink.events]
    # file and s3 look only in the caller's scope (no cross-scope probe, no timing oracle)
    cause = "absent" if store_url.startswith(("s3://", "file://")) else "other-scope"
    assert ("refused", cause) in names
    assert ("refused", "expired") in names
    assert ("expired", None) in names
    assert [e.data["ref"] for e in sink.named("evicted")] == [first.ref]
    assert all(e.data.get("reason") == "missing-or-expired" for e in sink.named("refused"))
    trace = msgspec.json.encode([e.to_json() for e in sink.events])
    assert secret not in trace
    store.close()


@pytest.mark.parametrize("adapter", ["memory", "file", "sqlite"])
def test_get_stream_verifies_like_get_and_names_the_digest(
    adapter: str, make_url: Callable[[str], str]
) -> None:
    from byref.store.conformance.runner import battery_for_url

    harness = battery_for_url(make_url(adapter))
    store = harness.create_store()
    scope = Scope("t")
    meta = store.put(scope, b"0123456789" * 10, PutOptions(kind="k", digest=True))
    assert harness.corrupt is not None
    harness.corrupt(store, scope, meta.ref)
    assert can_get_stream(store)
    streamed = store.get_stream(scope, meta.ref)
    assert streamed is not None and streamed.meta.digest == meta.digest
    with pytest.raises(ArtifactIntegrityError) as info:
        next(streamed.chunks)  # one chunk only: it is the last, so it is withheld
    assert str(info.value) == (
        f"Artifact {meta.ref!r} failed its integrity check while being streamed: the bytes read "
        f"do not match {meta.digest!r}, so the last chunk was withheld. Re-create it; do not "
        "trust this copy.")
    with pytest.raises(ArtifactIntegrityError, match=rf"^Artifact {meta.ref!r} failed its "
                       r"integrity check: stored bytes do not match 'sha256:"):
        store.get(scope, meta.ref)


def test_damaged_record_names_where_it_lives(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    meta = store.put(Scope("t"), b"x", OPTS)
    record = next(tmp_path.rglob(f"{meta.ref}.json"))
    record.write_bytes(b"{not json")
    with pytest.raises(ArtifactIntegrityError, match=rf"^The artifact record at "
                       rf"{str(record)!r} is damaged \(.*\); delete that artifact or restore"):
        store.head(Scope("t"), meta.ref)


def test_truncated_payload_is_refused_by_get(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    meta = store.put(Scope("t"), b"abcdef", OPTS)
    next(tmp_path.rglob(f"{meta.ref}.bin")).write_bytes(b"abc")
    with pytest.raises(ArtifactIntegrityError, match=r"3 bytes are stored but its record says 6"):
        store.get(Scope("t"), meta.ref)


def test_scope_values_never_escape_the_file_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    store = FileStore(root)
    for value in ["../../escape", "/abs", "..", "a\\..\\b", "%2e%2e%2f"]:
        store.put(Scope(value, value, value), b"x", OPTS)
    assert not (tmp_path / "escape").exists()
    everything = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert everything and all(root in p.parents for p in everything)


def test_memory_store_is_bounded_by_default() -> None:
    store = open_store("memory://")
    with pytest.raises(ArtifactTooLargeError):
        store.put_stream(Scope("t"), iter(()), (256 << 20) + 1, OPTS)  # type: ignore[attr-defined]


def test_a_crashed_writers_temporary_files_are_swept_and_a_live_ones_kept(
    tmp_path: Path,
) -> None:
    import os
    import socket
    import subprocess
    import sys

    store = FileStore(tmp_path)
    scope = Scope("t")
    store.put(scope, b"x", OPTS)
    directory = next(tmp_path.rglob("art_*.json")).parent
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True, timeout=scaled(60))
    dead = int(finished.stdout)
    host = socket.gethostname()
    orphan = directory / f".incoming-{host}-{dead}-abc123"
    orphan_meta = directory / f".meta-{host}-{dead}-def456"
    live = directory / f".incoming-{host}-{os.getpid()}-ghi789"
    remote = directory / f".incoming-elsewhere-{dead}-jkl012"
    legacy = directory / ".incoming-mno345"  # older name: its writer cannot be known
    for path in (orphan, orphan_meta, live, remote, legacy):
        path.write_bytes(b"partial")
    assert len(store.list(scope)) == 1  # listing sweeps the scope
    assert not orphan.exists() and not orphan_meta.exists()
    assert live.exists() and remote.exists() and legacy.exists()
    store.put_stream(scope, iter([b"abc"]), 3, OPTS)  # its own temp file is gone after
    assert sorted(p.name for p in directory.glob(".incoming-*")) == sorted(
        [live.name, remote.name, legacy.name])
