"""A writer killed with SIGKILL while `put_stream` is feeding it leaves nothing visible and, once
the store is reopened, no litter: no temporary file (file), no orphan chunk rows (SQL). Also: the
file store answers a lookup from the caller's scope directory alone."""

from __future__ import annotations

import os
import pathlib
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from byref.store import FileStore, PutOptions, Scope, can_get_stream, mint_key, open_store

WAIT = 120.0
CHILD = """
import sys
from byref.store import PutOptions, Scope, open_store

store = open_store(sys.argv[1])

def chunks():
    yield b"x" * (1 << 20)
    yield b"y" * (1 << 20)
    sys.stdout.write("fed\\n")
    sys.stdout.flush()
    sys.stdin.readline()  # the parent kills us while we wait here
    yield b"never"

store.put_stream(Scope(sys.argv[2]), chunks(), 8 << 20, PutOptions(kind="test/bytes"))
"""


def _kill_mid_put(url: str, tenant: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, url, tenant], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            ready = sel.select(timeout=WAIT)
        line = proc.stdout.readline() if ready else b""
        assert line == b"fed\n", f"the writer never reported its chunks (got {line!r})"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=WAIT) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if p.name.startswith((".incoming-", ".meta-"))]


def test_file_kill_mid_put_leaves_no_litter_after_reopen(tmp_path: Path) -> None:
    root = tmp_path / "files"
    scope = Scope(f"kill-{mint_key()}")
    FileStore(root).put(Scope("other"), b"kept", PutOptions(kind="k"))
    _kill_mid_put(f"file://{root}", scope.tenant)
    litter = _temp_files(root)
    assert litter and litter[0].stat().st_size >= 1 << 20  # the dead writer's partial payload
    reopened = FileStore(root)
    assert _temp_files(root) == []  # swept at open, before anyone lists that scope
    assert list(reopened.list(scope)) == []
    assert [p.name for p in root.rglob("art_*")] != []  # the other scope's artifact is intact
    after = reopened.put(scope, b"still works", PutOptions(kind="k"))
    assert [m.ref for m in reopened.list(scope)] == [after.ref]


@pytest.mark.parametrize("adapter", ["sqlite", "postgres"])
def test_sql_kill_mid_put_leaves_nothing(adapter: str, make_url: Callable[[str], str]) -> None:
    url = make_url(adapter)
    scope = Scope(f"kill-{mint_key()}")
    open_store(url).close()  # the tables exist before the child races to create them
    _kill_mid_put(url, scope.tenant)
    store: Any = open_store(url)
    assert list(store.list(scope)) == []
    with store._read() as tx:
        orphans = tx.rows("SELECT count(*) FROM {c} WHERE ref NOT IN (SELECT ref FROM {a})")
    assert orphans[0][0] == 0
    after = store.put(scope, b"still works", PutOptions(kind="k"))
    assert [m.ref for m in store.list(scope)] == [after.ref]
    store.close()


def test_file_lookups_touch_only_the_callers_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path)
    mine, theirs = Scope("mine"), Scope("theirs")
    for i in range(50):
        store.put(Scope(f"crowd-{i}"), b"x", PutOptions(kind="k"))
    real = store.put(theirs, b"secret", PutOptions(kind="k"))
    store.put(mine, b"own", PutOptions(kind="k"))  # the caller's directory exists
    listed: list[str] = []

    def spy(name: str, real_fn: Any) -> Any:
        def wrapper(*args: Any, **kw: Any) -> Any:
            listed.append(f"{name}({args[0]!s})")
            return real_fn(*args, **kw)
        return wrapper

    for name in ("glob", "rglob", "iterdir"):
        monkeypatch.setattr(pathlib.Path, name, spy(name, getattr(pathlib.Path, name)))
    monkeypatch.setattr(os, "scandir", spy("scandir", os.scandir))
    monkeypatch.setattr(os, "listdir", spy("listdir", os.listdir))
    for ref in (mint_key(), real.ref):  # a fabricated key, and another scope's real one
        assert store.head(mine, ref) is None
        assert store.get(mine, ref) is None
        assert can_get_stream(store) and store.get_stream(mine, ref) is None
        assert store.delete(mine, ref) is False
    assert listed == []  # no directory was listed: the cost does not grow with the scopes
