"""run_python's sandbox: each escape the [trust] issue found, tried for real and found closed."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator
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
from byref.tools.run_python.sandbox import Sandbox, minimal_env
from byref.transcript import Part

# Each tool is tried on its own where the host allows it; the reason is shown where it does not.
_BACKENDS = {"bwrap": Sandbox(unshare=None), "unshare": Sandbox(bwrap=None)}


@pytest.fixture(params=sorted(_BACKENDS))
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    chosen = _BACKENDS[request.param]
    reason = chosen.unavailable()
    if reason is not None:
        pytest.skip(f"no {request.param} sandbox on this host: {reason}")
    return chosen


def run(code: str, tmp_path: Path, runner: SubprocessRunner, limits: Limits | None = None,
        store: FileStore | None = None) -> Part:
    h = Harness(ScriptedModel([call("run_python", {"code": code}), say("x")]),
                [make_run_python_tool(runner=runner, limits=limits or Limits(wall_seconds=60))],
                store=store or FileStore(tmp_path / "store"))
    h.run_sync("go")
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def stdout_json(part: Part) -> Any:
    assert not part.is_error, part.rendered
    return json.loads(decode(result_text(part))["stdout"])


# Tries each expression; records its value, or the name of the OSError it raised.
_ATTEMPT = """
import json, os
seen = {}
def attempt(name, fn):
    try:
        seen[name] = fn()
    except OSError as exc:
        seen[name] = type(exc).__name__
"""


def test_the_hosts_processes_and_files_are_out_of_sight(tmp_path: Path,
                                                        sandbox: Sandbox) -> None:
    marker = tmp_path / "marker.txt"
    marker.write_text("outside the work dir")
    userns_cap = Path("/proc/sys/user/max_user_namespaces").read_text()
    code = _ATTEMPT + f"""
host = {os.getpid()}
attempt("pids", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
attempt("parent_cwd", lambda: os.readlink(f"/proc/{{os.getppid()}}/cwd"))
attempt("host_cwd", lambda: os.readlink(f"/proc/{{host}}/cwd"))
attempt("host_environ", lambda: open(f"/proc/{{host}}/environ").read())
attempt("marker", lambda: open({str(marker)!r}).read())
attempt("this_test", lambda: open({__file__!r}).read(10))
attempt("host_cwd_listing", lambda: os.listdir({os.getcwd()!r}))
attempt("etc", lambda: sorted(os.listdir("/etc")))
print(json.dumps(seen))
"""
    seen = stdout_json(run(code, tmp_path, SubprocessRunner(sandbox=sandbox)))
    assert seen["host_cwd"] == seen["host_environ"] == "FileNotFoundError"
    assert seen["marker"] == seen["this_test"] == "FileNotFoundError"
    assert "tests" not in seen["host_cwd_listing"]  # at most the venv's path is shown there
    assert len(seen["pids"]) <= 3 and max(seen["pids"]) < 100  # only the sandbox's own
    assert seen["parent_cwd"] == "PermissionError"  # the sandbox's init cannot be looked into
    assert set(seen["etc"]) <= {"ld.so.cache", "localtime", "alternatives"}
    # The sandbox turned off user namespaces inside itself, never on the host.
    assert Path("/proc/sys/user/max_user_namespaces").read_text() == userns_cap


def test_another_scopes_artifacts_cannot_be_read_or_rewritten(tmp_path: Path,
                                                              sandbox: Sandbox) -> None:
    store = FileStore(tmp_path / "store")
    victim = Scope("victim-tenant", "alice", "c1")
    meta = store.put(victim, b"the victim's bytes", PutOptions(kind="text/plain"))
    files = sorted(str(p.resolve()) for p in (tmp_path / "store").rglob("*") if p.is_file())
    before = {f: hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files}
    assert any(f.endswith(".bin") for f in files)
    code = _ATTEMPT + f"""
for path in {files!r}:
    attempt("read " + path, lambda: open(path, "rb").read().decode())
    attempt("write " + path, lambda: open(path, "wb").write(b"tampered"))
# The original route: the store beside the parent's working directory.
attempt("via_parent", lambda: os.listdir(f"/proc/{{os.getppid()}}/cwd/.byref"))
attempt("store_root", lambda: os.listdir({str((tmp_path / "store").resolve())!r}))
print(json.dumps(seen))
"""
    seen = stdout_json(run(code, tmp_path, SubprocessRunner(sandbox=sandbox), store=store))
    assert seen.pop("via_parent") == "PermissionError"  # the init's cwd is not the code's to see
    assert set(seen.values()) == {"FileNotFoundError"}, seen
    got = store.get(victim, meta.ref)
    assert got is not None and got.data == b"the victim's bytes"
    assert {f: hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files} == before


def test_host_secrets_in_the_environment_do_not_reach_the_code(
        tmp_path: Path, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-byref-test-" + os.urandom(8).hex()
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code = _ATTEMPT + """
seen["env"] = dict(os.environ)
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    attempt("environ " + pid, lambda: open(f"/proc/{pid}/environ").read())
print(json.dumps(seen))
"""
    part = run(code, tmp_path, SubprocessRunner(sandbox=sandbox))
    assert secret not in (result_text(part))
    allowed = set(minimal_env(tmp_path)) | {"BYREF_INPUTS", "BYREF_OUTPUT_DIR"}
    assert set(stdout_json(part)["env"]) <= allowed


def test_a_process_flood_stops_at_the_process_limit(tmp_path: Path, sandbox: Sandbox) -> None:
    code = ("import subprocess\n"
            "children = [subprocess.Popen(['sleep', '600']) for _ in range(200)]\n"
            "print('all', len(children))\n")
    started = time.monotonic()
    part = run(code, tmp_path, SubprocessRunner(sandbox=sandbox),
               Limits(max_processes=32, wall_seconds=60))
    assert result_text(part).startswith(
        "Your program was stopped at its process-count limit (one process with at most 32 "
        "threads; subprocesses cannot be started) and produced no result.")
    assert "all 200" not in result_text(part)
    assert time.monotonic() - started < 30  # the 600 s sleepers died with the sandbox


def _alive_in(pid_namespace: str) -> list[int]:
    """Host processes still in that pid namespace."""
    alive = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "ns" / "pid") == pid_namespace:
                alive.append(int(entry.name))
        except OSError:
            continue  # gone meanwhile, or not ours to look at
    return alive


_DETACH = """
import os, subprocess, sys, threading, time
try:  # a child in a session of its own that keeps stdout open and never ends
    subprocess.Popen(["setsid", sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"])
    print("started", flush=True)
except BlockingIOError:
    print("refused", flush=True)
# A thread that never ends: it is the process's, so it ends with it.
threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()
print(os.readlink("/proc/self/ns/pid"), flush=True)
"""


@pytest.mark.parametrize("main_waits", [False, True], ids=["main-exits", "main-sleeps"])
def test_a_detached_child_does_not_outlive_the_call(tmp_path: Path, sandbox: Sandbox,
                                                    main_waits: bool) -> None:
    code = _DETACH + ("time.sleep(3600)\n" if main_waits else "")
    started = time.monotonic()
    part = run(code, tmp_path, SubprocessRunner(sandbox=sandbox), Limits(wall_seconds=3))
    elapsed = time.monotonic() - started
    assert elapsed < 3 + 2.5  # a bound, not a benchmark
    text = part.rendered or ""
    if main_waits:
        assert text.startswith("Your program was stopped at its wall-clock limit")
    else:
        assert not part.is_error, text
    assert "refused" in text and "started" not in text  # no second process, detached or not
    match = re.search(r"pid:\[\d+\]", text)
    assert match, text
    assert _alive_in(match.group()) == []


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield server


def test_no_route_reaches_a_host_listener(tmp_path: Path, sandbox: Sandbox,
                                          listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    code = f"""
import ctypes, json, shutil, socket, struct, subprocess, sys
port, out = {port}, {{}}
try:
    socket.create_connection(("127.0.0.1", port), timeout=2)
    out["python"] = "connected"
except OSError as exc:
    out["python"] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM: below Python's audit hook
out["socket"] = [fd, ctypes.get_errno()]
addr = struct.pack("=H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1]) + bytes(8)
out["ctypes"] = [libc.connect(fd, addr, len(addr)), ctypes.get_errno()]
try:  # another program (curl, a second Python) would need a second process
    subprocess.run(["curl", "-sS", f"http://127.0.0.1:{{port}}/"], capture_output=True)
    out["subprocess"] = "ran"
except OSError as exc:
    out["subprocess"] = type(exc).__name__
print(json.dumps(out))
"""
    out = stdout_json(run(code, tmp_path, SubprocessRunner(sandbox=sandbox)))
    assert out["python"] == "PermissionError"  # the audit hook answers Python code first
    # The syscall filter refuses a socket of any family; behind it, the sandbox's loopback is
    # down (unshare) or its own (bwrap).
    assert out["socket"] == [-1, errno.EPERM]
    assert out["ctypes"] == [-1, errno.EBADF]
    assert out["subprocess"] == "BlockingIOError"
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing ever arrived


def test_the_venvs_packages_import_and_inputs_are_read_only(tmp_path: Path,
                                                           sandbox: Sandbox) -> None:
    code = _ATTEMPT + """
import msgspec
seen["msgspec"] = msgspec.json.encode([1]).decode()
manifest = os.environ["BYREF_INPUTS"]
attempt("inputs", lambda: open(os.path.join(os.path.dirname(manifest), "inputs", "x"), "w"))
attempt("tmp", lambda: open("/tmp/scratch.txt", "w").write("ok"))
print(json.dumps(seen))
"""
    seen = stdout_json(run(code, tmp_path, SubprocessRunner(sandbox=sandbox)))
    assert seen == {"msgspec": "[1]", "inputs": "OSError", "tmp": 2}


def test_only_regular_output_files_are_read_back(tmp_path: Path, sandbox: Sandbox) -> None:
    code = ("import os\nout = os.environ['BYREF_OUTPUT_DIR']\n"
            "os.mkfifo(os.path.join(out, 'pipe.csv'))\n"
            "os.symlink('/etc/hostname', os.path.join(out, 'host.txt'))\n"
            "open(os.path.join(out, 'real.txt'), 'w').write('kept')\n")
    result = decode(result_text(run(code, tmp_path, SubprocessRunner(sandbox=sandbox))))
    assert [f["name"] for f in result["files"]] == ["real.txt"]
    assert result["notes"] == ["'host.txt' is a symlink and was not read back",
                               "'pipe.csv' is not a regular file and was not read back"]


@pytest.mark.parametrize("swap", ["link", "remove"])
def test_an_output_directory_swapped_for_a_link_reads_nothing(tmp_path: Path, sandbox: Sandbox,
                                                               swap: str) -> None:
    # The host reads outputs after the run: a link to /etc would be read as the host sees it.
    code = ("import os, shutil\nout = os.environ['BYREF_OUTPUT_DIR']\nshutil.rmtree(out)\n"
            + ("os.symlink('/etc', out)\n" if swap == "link" else ""))
    result = decode(result_text(run(code, tmp_path, SubprocessRunner(sandbox=sandbox))))
    assert result["files"] == []
    assert result.get("notes") == (["the output directory was replaced, so nothing was read "
                                    "back"] if swap == "link" else None)
