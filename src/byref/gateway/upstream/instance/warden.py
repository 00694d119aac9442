"""The warden: ends the gateway's upstream process groups when the gateway dies unannounced.

Owns `watch` / `release` (the gateway's side: each upstream's process group, told to the warden
as it starts and ends) and `main` (the warden itself, this file run by itself: stdlib only). A
gateway that stops — SIGTERM, SIGINT, its stdin's end — ends every group itself (`spawn`); one
killed by SIGKILL or the OOM killer cannot, and its upstreams would exit at the end of their
stdin while their own children (a `sleep`, npx's node) lived on. The warden is one process per
gateway, started with its first upstream, in a session of its own: when the gateway's end of its
pipe closes, however the gateway ended, it SIGTERMs every group still recorded, and SIGKILLs
what is left after a grace. A process that leaves its group (`setsid`) is out of its reach, as it
is of a graceful stop's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

GRACE = 2.0
"""Seconds between the warden's SIGTERM and SIGKILL."""

_lock = threading.Lock()
_warden: subprocess.Popen[bytes] | None = None
_watched: set[int] = set()


def watch(pgid: int) -> None:
    """Record process group `pgid` with the warden (started now if none runs)."""
    with _lock:
        _watched.add(pgid)
        _tell(b"+%d\n" % pgid)


def release(pgid: int) -> None:
    """Group `pgid` was ended by the gateway itself: the warden forgets it."""
    with _lock:
        if pgid in _watched:
            _watched.discard(pgid)
            _tell(b"-%d\n" % pgid)


def warden_pid() -> int | None:
    """The running warden's process id, if one was started."""
    return _warden.pid if _warden is not None and _warden.poll() is None else None


def _tell(line: bytes) -> None:
    global _warden
    for _ in range(2):
        if _warden is None or _warden.poll() is not None:
            try:
                _warden = subprocess.Popen(
                    [sys.executable, "-I", "-S", __file__], stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            except OSError:
                _warden = None
                return  # no warden: a graceful stop still ends every group
            line = b"".join(b"+%d\n" % g for g in _watched)  # a new warden learns them all
        assert _warden.stdin is not None
        try:
            _warden.stdin.write(line)
            _warden.stdin.flush()
            return
        except OSError:
            _warden = None


def main() -> None:
    """The warden: read `+pgid` / `-pgid` lines until the gateway's end closes, then end every
    group still recorded."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(0, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
    _signal(groups, signal.SIGTERM)
    deadline = time.monotonic() + GRACE
    while groups and time.monotonic() < deadline:
        groups = {g for g in groups if _alive(g)}
        time.sleep(0.02)
    _signal(groups, signal.SIGKILL)


def _signal(groups: set[int], sig: int) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    main()
