"""Everything a run can make the host hold is the run's budget: memory (its address space),
disk (its tmpfs, /dev/shm included) and descriptors. Each route around them the [trust III]
issue found — memfd files, SysV and POSIX IPC, sockets made through libc, grown pipe buffers,
pinned pipe pages, descriptors passed in flight, inotify watches — is refused by the syscall
filter, and the host's shared memory is measured before, during and after a run that tries
them all."""

from __future__ import annotations

import ast
import json
import platform
from pathlib import Path
from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import FileStore, MemoryStore
from byref.testing import result_text
from byref.tools import tool
from byref.tools.code_mode.run_code import CodeMode, describe_tool
from byref.tools.run_python.code import make_run_python_tool
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

MB = 1 << 20
EPERM, ENOSYS, EMFILE = 1, 38, 24


def _runner() -> SubprocessRunner:
    reason = Sandbox(bwrap=None).unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    return SubprocessRunner(sandbox=Sandbox(bwrap=None))


def _run_python(code: str, tmp_path: Path, limits: Limits) -> Part:
    h = Harness(ScriptedModel([call("run_python", {"code": code}), say("x")]),
                [make_run_python_tool(runner=_runner(), limits=limits)],
                store=FileStore(tmp_path / "store"))
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


# Each route, tried through libc (the audit hook sees only Python's own socket module).
_ROUTES = """
import ctypes, fcntl, json, os
libc = ctypes.CDLL(None, use_errno=True)
seen = {}
def attempt(name, fn):
    ctypes.set_errno(0)
    try:
        got = fn()
    except OSError as exc:
        seen[name] = exc.errno
        return
    seen[name] = ctypes.get_errno() if got == -1 else "made"
pair = (ctypes.c_int * 2)()
attempt("memfd", lambda: os.memfd_create("x"))
attempt("memfd_libc", lambda: libc.memfd_create(b"x", 0))
attempt("socketpair_unix", lambda: libc.socketpair(1, 1, 0, pair))
attempt("socket_unix", lambda: libc.socket(1, 1, 0))
attempt("socket_inet", lambda: libc.socket(2, 2, 0))
attempt("socket_netlink", lambda: libc.socket(16, 3, 0))
attempt("shmget", lambda: libc.shmget(0, 1 << 20, 0o1600))
attempt("msgget", lambda: libc.msgget(0, 0o1600))
attempt("semget", lambda: libc.semget(0, 1, 0o1600))
attempt("mq_open", lambda: libc.mq_open(b"/q", 0o102, 0o600, None))
attempt("inotify", lambda: libc.inotify_init1(0))
attempt("sendmsg", lambda: libc.sendmsg(0, None, 0))
r, w = os.pipe()
attempt("grow_pipe", lambda: fcntl.fcntl(w, 1031, 1 << 20))  # F_SETPIPE_SZ
buf = ctypes.create_string_buffer(4096)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 4096)
attempt("vmsplice", lambda: libc.vmsplice(w, iov, 1, 0))
fds = []
try:
    while len(fds) < 100_000:
        fds.extend(os.pipe())
except OSError as exc:
    seen["pipes_stop"] = exc.errno
seen["open_fds"] = len(fds)
for fd in fds:
    os.close(fd)
print(json.dumps(seen))
"""


def test_every_route_around_the_memory_and_disk_budget_is_refused(tmp_path: Path) -> None:
    if platform.machine() != "x86_64":
        pytest.skip("the fcntl and IPC flags here are x86_64 Linux's")
    seen = json.loads(decode(result_text(_run_python(_ROUTES, tmp_path, Limits())))["stdout"])
    open_fds = seen.pop("open_fds")
    assert seen.pop("pipes_stop") == EMFILE
    assert seen == {"memfd": ENOSYS, "memfd_libc": ENOSYS} | {
        name: EPERM for name in ("socketpair_unix", "socket_unix", "socket_inet",
                                 "socket_netlink", "shmget", "msgget", "semget", "mq_open",
                                 "inotify", "sendmsg", "grow_pipe", "vmsplice")}
    # Descriptors are the run's budget too: so many pipes of 64 KiB, and no more.
    assert open_fds <= Limits().max_open_files


def test_run_codes_description_states_the_budget_that_holds() -> None:
    said = describe_tool(Limits(), CodeMode())
    assert ("20s CPU; 1024 MB memory, 256 MB disk in all (/tmp, /dev/shm and the working "
            "directory) and 256 open files: everything the program can make the host hold. "
            "No network.") in said


# Tries to make the host hold more than the run's budget through every route there was, holds
# what it got while the host measures itself (the `meminfo` tool), then lets go.
_GRAB = """
import ctypes, fcntl, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.shmat.restype = ctypes.c_void_p
held = {"memfd": 0, "sysv_shm": 0, "sockets": 0, "pipes": 0, "dev_shm": 0}
keep = []
block = b"x" * (1 << 20)
try:
    for i in range(16):
        fd = os.memfd_create(f"m{i}")
        keep.append(fd)
        for _ in range(64):
            held["memfd"] += os.write(fd, block)
except OSError:
    pass
for _ in range(4):
    ident = libc.shmget(0, 192 << 20, 0o1600)
    if ident < 0:
        break
    at = libc.shmat(ident, None, 0)
    if at in (None, 2**64 - 1):
        break
    ctypes.memset(at, 1, 192 << 20)
    libc.shmdt(ctypes.c_void_p(at))
    held["sysv_shm"] += 192 << 20
try:
    with open("/dev/shm/fill", "wb") as fh:
        while True:
            held["dev_shm"] += fh.write(block)
except OSError:
    pass
pair = (ctypes.c_int * 2)()
for _ in range(1500):
    if libc.socketpair(1, 1, 0, pair) != 0:
        break
    keep.extend(pair)
    os.set_blocking(pair[0], False)
    try:
        while True:
            held["sockets"] += os.write(pair[0], block[:65536])
    except OSError:
        pass
try:
    while held["pipes"] < 512 << 20:
        r, w = os.pipe()
        keep += [r, w]
        try:
            fcntl.fcntl(w, 1031, 1 << 20)
        except OSError:
            pass
        os.set_blocking(w, False)
        try:
            while True:
                held["pipes"] += os.write(w, block)
        except BlockingIOError:
            pass
except OSError:
    pass
print(held)
tools.meminfo()
"""


def _meminfo() -> dict[str, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    return {name: int(fields[name].split()[0]) << 10 for name in ("Shmem", "MemAvailable")}


def test_a_run_holds_no_more_host_memory_than_its_budget() -> None:
    limits = Limits(memory_bytes=256 * MB, disk_bytes=64 * MB, file_bytes=64 * MB,
                    wall_seconds=120, cpu_seconds=60, max_stdout_chars=4_000)
    during: list[dict[str, int]] = []

    @tool
    def meminfo() -> str:
        """The host's shared memory and available memory, read while the program holds."""
        during.append(_meminfo())
        return "measured"

    before = _meminfo()
    h = Harness(ScriptedModel([call("run_code", {"code": _GRAB}), say("x")]), [meminfo],
                store=MemoryStore(), code_mode=CodeMode(runner=_runner(), limits=limits))
    h.run_sync("go")
    part = [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]
    after = _meminfo()
    text = part.rendered or ""
    held: dict[str, Any] = ast.literal_eval(text[text.index("{'memfd'"):].split("}")[0] + "}")
    [measured] = during
    grown = measured["Shmem"] - before["Shmem"]
    print(f"held {held}; host Shmem +{grown >> 20} MiB during, "
          f"+{(after['Shmem'] - before['Shmem']) >> 20} MiB after; MemAvailable "
          f"-{(before['MemAvailable'] - measured['MemAvailable']) >> 20} MiB during")
    assert held["memfd"] == held["sysv_shm"] == held["sockets"] == 0
    assert held["pipes"] <= (limits.max_open_files // 2) * 64 * 1024
    assert 32 * MB < held["dev_shm"] <= limits.disk_bytes
    # Other processes share this host: a margin for them, far under what the routes held.
    assert grown < limits.disk_bytes + 96 * MB
