"""run_python's limits hold for the whole run, whatever the code does (threads, fork, files,
/dev/shm); the init cannot be traced; the syscall filter answers EPERM; and each edge (a
non-UTF-8 output name, a write past the file-size limit, a damaged input) is its own refusal."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

import pytest

from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import FileStore
from byref.store.port import PutOptions, Scope
from byref.testing import result_text
from byref.tools.run_python.code import make_run_python_tool
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

_BACKENDS = {"bwrap": Sandbox(unshare=None), "unshare": Sandbox(bwrap=None)}
MB = 1 << 20


@pytest.fixture(params=sorted(_BACKENDS))
def runner(request: pytest.FixtureRequest) -> SubprocessRunner:
    chosen = _BACKENDS[request.param]
    reason = chosen.unavailable()
    if reason is not None:
        pytest.skip(f"no {request.param} sandbox on this host: {reason}")
    made = SubprocessRunner(sandbox=chosen)
    # libseccomp is a dependency: every limit is the run's (bwrap's tmpfs takes no file cap).
    assert made.unenforced() == ([] if request.param == "unshare" else [_BWRAP_SAYS])
    return made


_BWRAP_SAYS = ("under bwrap the disk budget is split (a quarter for /tmp, a quarter for "
               "/dev/shm, half for the working directory) and files are not counted")


def backend(runner: SubprocessRunner) -> str:
    return runner.sandbox.backend(runner.python)[0]


def run(code: str, tmp_path: Path, runner: SubprocessRunner, limits: Limits | None = None,
        inputs: dict[str, Any] | None = None, store: FileStore | None = None) -> Part:
    args: dict[str, Any] = {"code": code} | ({"inputs": inputs} if inputs else {})
    h = Harness(ScriptedModel([call("run_python", args), say("x")]),
                [make_run_python_tool(runner=runner, limits=limits or Limits(wall_seconds=60))],
                store=store or FileStore(tmp_path / "store"))
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def stdout_json(part: Part) -> Any:
    assert not part.is_error, part.rendered
    return json.loads(decode(result_text(part))["stdout"])


# Threads hold memory in one address space: together they meet the run's one budget.
_THREADS_HOLD = """
import json, threading
held, failed = [], []
def grab():
    try:
        for _ in range(40):
            held.append(bytearray(16 << 20))
    except MemoryError:
        failed.append(1)
threads = [threading.Thread(target=grab) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"held_mb": sum(len(b) for b in held) >> 20, "failed": len(failed)}))
"""


def test_memory_held_by_threads_is_one_budget(tmp_path: Path, runner: SubprocessRunner) -> None:
    # Four threads each try for 640 MB; the run's 512 MB is all they get between them.
    seen = stdout_json(run(_THREADS_HOLD, tmp_path, runner, Limits(memory_bytes=512 * MB)))
    assert seen["failed"] == 4
    assert seen["held_mb"] < 512


def test_a_forked_child_cannot_add_memory(tmp_path: Path, runner: SubprocessRunner) -> None:
    # The escape: children, each under its own RLIMIT_AS, held twice the budget.
    code = ("import os, multiprocessing\n"
            "x = bytearray(200 << 20)\n"
            "os.fork()\n")
    part = run(code, tmp_path, runner, Limits(memory_bytes=512 * MB))
    assert result_text(part).startswith(
        "Your program was stopped at its process-count limit (one process with at most 64 "
        "threads; subprocesses cannot be started) and produced no result.")
    for via in ("import subprocess\nsubprocess.run(['true'])\n",
                "import multiprocessing as m\np = m.Process(target=print)\np.start()\n"):
        assert result_text(run(via, tmp_path, runner)).startswith(
            "Your program was stopped at its process-count limit")


_FILL = """
import json, os
written = {"tmp": 0, "shm": 0, "cwd": 0}
paths = {"tmp": "/tmp/fill", "shm": "/dev/shm/fill", "cwd": "fill"}
block = b"x" * (1 << 20)
files = {k: open(p, "wb", buffering=0) for k, p in paths.items()}
try:
    while True:
        for k, fh in files.items():
            written[k] += fh.write(block)
except OSError as exc:
    written["error"] = exc.errno
print(json.dumps(written))
"""


def test_disk_across_tmp_shm_and_cwd_is_one_budget(tmp_path: Path,
                                                   runner: SubprocessRunner) -> None:
    seen = stdout_json(run(_FILL, tmp_path, runner, Limits(disk_bytes=96 * MB)))
    assert seen.pop("error") == 28  # ENOSPC: the run's disk, not the host's
    assert 60 * MB < sum(seen.values()) <= 96 * MB
    assert min(seen.values()) > 0  # all three places draw on it


def test_a_full_disk_is_refused_as_the_disk_limit(tmp_path: Path,
                                                  runner: SubprocessRunner) -> None:
    code = "import os\nwith open('/dev/shm/big', 'wb') as f:\n    f.write(os.urandom(80 << 20))\n"
    part = run(code, tmp_path, runner, Limits(disk_bytes=64 * MB))
    says = "" if backend(runner) == "unshare" else f"; on this host {_BWRAP_SAYS}"
    assert result_text(part).startswith(
        "Your program was stopped at its disk limit (64 MB and 16,384 files in all in /tmp, "
        f"/dev/shm and the working directory{says}) and produced no result.")
    if backend(runner) == "bwrap":
        return  # bwrap's --tmpfs takes a size and no file count: the description says so
    many = "import os\nfor i in range(100_000):\n    open(f'/tmp/{i}', 'w').close()\n"
    part = run(many, tmp_path, runner, Limits(disk_files=1_000, cpu_seconds=60))
    assert result_text(part).startswith(
        "Your program was stopped at its disk limit (256 MB and 1,000 files in all")


def test_a_write_past_the_file_size_limit_is_that_limit(tmp_path: Path,
                                                        runner: SubprocessRunner) -> None:
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (40 << 20))\n"
    part = run(code, tmp_path, runner, Limits(file_bytes=16 * MB))
    assert result_text(part).startswith(
        "Your program was stopped at its file-size limit (16 MB a file) and produced no "
        "result.")


def test_threads_past_the_process_cap_stop_at_it(tmp_path: Path,
                                                 runner: SubprocessRunner) -> None:
    code = ("import threading, time\n"
            "for _ in range(200):\n"
            "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
            "print('all 200')\n")
    started = time.monotonic()
    part = run(code, tmp_path, runner, Limits(max_processes=16))
    assert result_text(part).startswith(
        "Your program was stopped at its process-count limit (one process with at most 16 "
        "threads; subprocesses cannot be started)")
    assert time.monotonic() - started < 30  # the sleepers ended with the process


def test_the_wall_clock_ends_a_run_whose_threads_wait(tmp_path: Path,
                                                      runner: SubprocessRunner) -> None:
    code = ("import threading, time\n"
            "threading.Thread(target=time.sleep, args=(3600,)).start()\n")
    started = time.monotonic()
    part = run(code, tmp_path, runner, Limits(wall_seconds=2))
    assert result_text(part).startswith(
        "Your program was stopped at its wall-clock limit (2s) and produced no result.")
    assert time.monotonic() - started < 2 + 2.5  # a bound, not a benchmark


_TRACE_INIT = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
seen = {}
for name, path in (("mem", "/proc/1/mem"), ("environ", "/proc/1/environ"),
                   ("root", "/proc/1/root/"), ("fd", "/proc/1/fd/0")):
    try:
        os.close(os.open(path, os.O_RDONLY))
        seen[name] = "opened"
    except OSError as exc:
        seen[name] = exc.errno
seen["ptrace_attach"] = [libc.ptrace(16, 1, 0, 0), ctypes.get_errno()]  # PTRACE_ATTACH
seen["ptrace_seize"] = [libc.ptrace(0x4206, 1, 0, 0), ctypes.get_errno()]  # PTRACE_SEIZE
buf = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
remote = (ctypes.c_void_p * 2)(0x400000, 8)
libc.process_vm_readv.restype = ctypes.c_ssize_t
seen["vm_read"] = [libc.process_vm_readv(1, local, 1, remote, 1, 0), ctypes.get_errno()]
print(json.dumps(seen))
"""


def test_the_sandboxs_init_cannot_be_traced_or_read(tmp_path: Path,
                                                    runner: SubprocessRunner) -> None:
    seen = stdout_json(run(_TRACE_INIT, tmp_path, runner))
    assert seen == {"mem": 13, "environ": 13, "root": 13, "fd": 13,  # EACCES: not dumpable
                    "ptrace_attach": [-1, 1], "ptrace_seize": [-1, 1], "vm_read": [-1, 1]}


_DENIED = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
seen = {}
def call(name, *args):
    seen[name] = [getattr(libc, name)(*args), ctypes.get_errno()]
    ctypes.set_errno(0)
call("unshare", 0x10000000)                       # CLONE_NEWUSER
call("unshare", 0x00020000)                       # CLONE_NEWNS
call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
call("setns", 0, 0)
call("personality", 0xffffffff)
for name, nr in (("keyctl", 250), ("bpf", 321), ("perf_event_open", 298), ("io_uring_setup", 425),
                 ("userfaultfd", 323), ("kexec_load", 246), ("init_module", 175)):
    seen[name] = [libc.syscall(nr, 0, 0, 0, 0, 0), ctypes.get_errno()]
    ctypes.set_errno(0)
print(json.dumps(seen))
"""


def test_the_syscall_filter_answers_eperm(tmp_path: Path, runner: SubprocessRunner) -> None:
    if platform.machine() != "x86_64":
        pytest.skip(f"the raw syscall numbers here are x86_64's, not {platform.machine()}'s")
    seen = stdout_json(run(_DENIED, tmp_path, runner))
    assert seen == {key: [-1, 1] for key in seen}, seen  # EPERM, each of them
    assert len(seen) == 11


def test_an_output_with_a_non_utf8_name_is_refused_and_the_rest_kept(
        tmp_path: Path, runner: SubprocessRunner) -> None:
    code = ("import os\nout = os.environ['BYREF_OUTPUT_DIR'].encode()\n"
            "open(os.path.join(out, b'bad\\xff.txt'), 'w').write('lost')\n"
            "open(os.path.join(out, b'good.txt'), 'w').write('kept')\n"
            "open(os.path.join(out, b'shut.txt'), 'w').write('unreadable')\n"
            "os.chmod(os.path.join(out, b'shut.txt'), 0)\n")
    result = decode(result_text(run(code, tmp_path, runner)))
    assert [f["name"] for f in result["files"]] == ["good.txt", "bad\\xff.txt", "shut.txt"]
    assert result["files"][0]["bytes"] == 4
    assert result["files"][1:] == [
        {"name": "bad\\xff.txt", "stored": False,
         "reason": "its name is not UTF-8, so it cannot be named in a result; give output files "
                   "UTF-8 names."},
        {"name": "shut.txt", "stored": False,
         "reason": "it could not be read back (Permission denied); leave output files "
                   "readable."}]


def test_a_damaged_input_is_the_integrity_refusal(tmp_path: Path,
                                                  runner: SubprocessRunner) -> None:
    store = FileStore(tmp_path / "store")
    scope = Scope("local", conversation="damaged-input")
    meta = store.put(scope, b"a,b\n1,2\n" * 1000, PutOptions(kind="text/csv", digest=True))
    [payload] = (tmp_path / "store").rglob(f"{meta.ref}.bin")
    payload.write_bytes(b"a,b\n9,9\n" * 1000)  # same size, other bytes
    h = Harness(ScriptedModel([call("run_python", {"code": "print(1)",
                                                   "inputs": {"sales": meta.ref}}), say("x")]),
                [make_run_python_tool(runner=runner)], store=store, scope=scope)
    h.run_sync("go")
    part = [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]
    assert part.is_error
    assert part.rendered == (
        f"Tool 'run_python' was not executed: input 'sales' = {meta.ref!r} failed its integrity "
        "check and was not used; produce it again.")


def test_the_description_names_each_limit_and_what_holds_per_process(
        runner: SubprocessRunner) -> None:
    said = make_run_python_tool(runner=runner).description
    assert ("Limits for the whole run: 20s CPU, 1024 MB memory, 256 MB and 16,384 files in all "
            "in /tmp, /dev/shm and the working directory (256 MB a file), 256 open files, 60s "
            "wall clock, one process (no subprocesses; up to 64 threads), 32 output files. "
            "Everything the program can make the host hold is within these: no shared memory "
            "but /dev/shm, no sockets, pipes of 64 KiB.") in said
    if backend(runner) == "unshare":
        assert "On this host" not in said
    else:
        assert f"On this host: {_BWRAP_SAYS}." in said
    loose = make_run_python_tool(runner=SubprocessRunner(isolation="none")).description
    assert ("On this host: this runner is not isolated, so memory is per process and disk per "
            "file.") in loose
    assert "Everything the program can make the host hold" not in loose
