"""Warm sandboxes (`run_python.warm`): started ahead, each used by one run, never reused, under
every limit a cold run is under (the same rlimits, syscall filter, mounts and pids, read from
inside both), its wall clock starting with its program.

What a run leaves behind — a global, a builtin, a patched module, an environment variable, a
module in sys.modules, files in /tmp, /dev/shm and its work directory, descriptors — is looked
for by the next run on the same runner, which took a warm sandbox; the sandbox that replaces one
scope's run carries nothing of it to another scope's run; a warm child killed while it waits is
replaced, never handed out; warm and running sandboxes stay within the runner's cap.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _waits import scaled
from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import MemoryStore
from byref.store.port import PutOptions, Scope
from byref.testing import result_text
from byref.tools import tool
from byref.tools.code_mode import code_child
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.code import make_run_python_tool
from byref.tools.run_python.launch import BOOTSTRAP
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import minimal_env
from byref.tools.run_python.warm import Key
from byref.transcript import Part

LIMITS = Limits(wall_seconds=60)
KEY: Key = (LIMITS, BOOTSTRAP, False)

LEAVE = """
import builtins, json, os, sys
builtins.LEFT = "a builtin"
json.LEFT = "a module attribute"
os.environ["LEFT"] = "an environment variable"
sys.modules["left_behind"] = json
LEFT_GLOBAL = "a global"
for place in ("/tmp", "/dev/shm", "."):
    with open(os.path.join(place, "left.txt"), "w") as fh:
        fh.write("left")
kept = os.dup2(os.open("/tmp/left.txt", os.O_RDONLY), 200)
print(json.dumps({"cwd": os.getcwd(), "kept_fd": kept}))
"""

LOOK = """
import builtins, json, os, sys
print(json.dumps({
    "builtin": hasattr(builtins, "LEFT"), "module": hasattr(json, "LEFT"),
    "env": sorted(os.environ), "sys_modules": "left_behind" in sys.modules,
    "global": "LEFT_GLOBAL" in globals(),
    "files": [p for p in ("/tmp/left.txt", "/dev/shm/left.txt", "left.txt", "outputs/a.txt")
              if os.path.exists(p)],
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
    "cwd": os.getcwd(), "inputs": sorted(os.listdir("inputs")),
}))
"""


@pytest.fixture
def runner() -> Iterator[SubprocessRunner]:
    made = SubprocessRunner(warm=1)
    reason = made.unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    yield made
    made.close()


def _run(tools: list[Any], code: str, store: MemoryStore | None = None, *,
         tool_name: str = "run_python", code_mode: CodeMode | None = None,
         inputs: dict[str, Any] | None = None, scope: Scope | None = None) -> Part:
    args: dict[str, Any] = {"code": code, **({"inputs": inputs} if inputs else {})}
    h = Harness(ScriptedModel([call(tool_name, args), say("x")]), tools,
                store=store or MemoryStore(), code_mode=code_mode, scope=scope)
    if threading.current_thread() is threading.main_thread():
        h.run_sync("go")
    else:  # a thread's own loop, closed with it (run_sync keeps one per thread open)
        asyncio.run(h.run("go"))
    return [p for m in h.transcript for p in m.parts if p.type == "tool_result"][-1]


def _stdout(part: Part) -> Any:
    assert not part.is_error, part.rendered
    return json.loads(decode(result_text(part))["stdout"])


def _warm_run(runner: SubprocessRunner, key: Key, run: Any) -> Any:
    """`run()` on a warm sandbox: one is ready before, and the run took it."""
    pool = runner.pool
    assert pool is not None
    assert pool.wait_ready(key, scaled(20)), "no warm sandbox came up"
    taken = pool.taken
    got = run()
    assert pool.taken == taken + 1, "the run did not take the warm sandbox"
    return got


def test_a_run_sees_nothing_a_previous_run_left(runner: SubprocessRunner) -> None:
    run_python = make_run_python_tool(runner=runner, limits=LIMITS)
    left = _stdout(_warm_run(runner, KEY, lambda: _run([run_python], LEAVE)))
    seen = _stdout(_warm_run(runner, KEY, lambda: _run([run_python], LOOK)))
    assert not (seen["builtin"] or seen["module"] or seen["sys_modules"] or seen["global"])
    assert seen["files"] == []
    assert left["kept_fd"] not in seen["fds"] and seen["fds"] == [0, 1, 2, 3]  # 3: listdir's
    assert set(seen["env"]) <= set(minimal_env(Path("/"))) | {"BYREF_INPUTS",
                                                               "BYREF_OUTPUT_DIR"}
    assert seen["cwd"] != left["cwd"]  # a staging area of its own
    assert not Path(left["cwd"]).exists()  # the previous run's is gone from the host
    pool = runner.pool
    assert pool is not None and pool.taken == 2 and pool.live <= 2


def test_a_program_sees_nothing_a_previous_program_left(runner: SubprocessRunner) -> None:
    from byref.tools.code_mode.run_code import _child_source

    @tool
    def ping(n: int) -> int:
        """Return n."""
        return n

    mode = CodeMode(runner=runner, limits=LIMITS)
    key: Key = (LIMITS, _child_source(), True)
    leave = LEAVE.replace("import builtins,", "tools.LEFT = 1\nimport builtins,")
    look = LOOK.replace('"builtin":', '"tools": "LEFT" in vars(tools), "builtin":')
    leave += "tools.ping(n=1)\n"
    runner.warm_up(LIMITS, bootstrap=_child_source(), channel=True)  # as the tool does, made
    left = _warm_run(runner, key, lambda: _run([ping], leave, tool_name="run_code",
                                               code_mode=mode))
    assert not left.is_error, left.rendered
    part = _warm_run(runner, key, lambda: _run([ping], look, tool_name="run_code",
                                               code_mode=mode))
    assert not part.is_error, part.rendered
    printed = next(line for line in result_text(part).splitlines() if line.startswith("{"))
    seen = json.loads(printed)
    assert not (seen["tools"] or seen["builtin"] or seen["module"] or seen["sys_modules"]
                or seen["global"])
    assert seen["files"] == []
    assert set(seen["env"]) <= set(minimal_env(Path("/"))) | {"BYREF_INPUTS",
                                                               "BYREF_OUTPUT_DIR"}
    # The tool channel (its descriptor) is the only one beyond stdio and listdir's.
    assert len(seen["fds"]) == 5, seen["fds"]


def test_a_warm_sandbox_carries_nothing_from_one_scope_to_another(
        runner: SubprocessRunner) -> None:
    # Warm sandboxes are bound to no scope: each is started empty and given to whoever runs
    # next. Alice's run (her input staged, her output written) starts the sandbox Bob gets.
    run_python = make_run_python_tool(runner=runner, limits=LIMITS)
    store, alice, bob = MemoryStore(), Scope("acme", "alice", "c1"), Scope("acme", "bob", "c2")
    secret = store.put(alice, b"alice's secret", PutOptions(kind="text/plain"))
    write = LEAVE + "\nopen(os.environ['BYREF_OUTPUT_DIR'] + '/a.txt', 'w').write('hers')\n"
    pool = runner.pool
    assert pool is not None and pool.wait_ready(KEY, scaled(20))
    started = pool.started
    part = _run([run_python], write, store, inputs={"doc": secret.ref}, scope=alice)
    assert _stdout(part)["cwd"]
    # Her run's sandbox is replaced once her run is over; Bob gets the replacement.
    assert pool.wait_for(lambda: pool.started == started + 1, scaled(20))
    seen = _stdout(_warm_run(runner, KEY, lambda: _run([run_python], LOOK, store, scope=bob)))
    assert seen["inputs"] == [] and seen["files"] == []
    assert seen["cwd"] != _stdout(part)["cwd"]


def _code_child(launcher: int) -> int:
    """The warm child's pid: the launcher's descendant running the code's interpreter."""
    found: list[int] = []
    todo = [launcher]
    while todo:
        pid = todo.pop()
        for task in Path(f"/proc/{pid}/task").iterdir():
            todo += [int(c) for c in (task / "children").read_text().split()]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[1:3] == [b"-I", b"-c"] and b"BYREF_GO_FD" in argv[3]:
            found.append(pid)
    assert len(found) == 1, found
    return found[0]


def test_a_killed_warm_child_is_replaced_never_reused(runner: SubprocessRunner) -> None:
    run_python = make_run_python_tool(runner=runner, limits=LIMITS)
    pool = runner.pool
    assert pool is not None and pool.wait_ready(KEY, scaled(20))
    [entry] = pool._entries
    assert entry.launch is not None and entry.launch.proc is not None
    child = os.pidfd_open(_code_child(entry.launch.proc.pid))
    try:
        signal.pidfd_send_signal(child, signal.SIGKILL)
        assert select.select([child], [], [], scaled(20))[0], "the warm child did not die"
    finally:
        os.close(child)
    # Dead, whether or not the pool's watch has noticed yet: the next run never gets it.
    assert _stdout(_run([run_python], "print(6 * 7)")) == 42
    assert pool.wait_for(lambda: pool.discarded == 1 and pool.ready(KEY) == 1, scaled(20))
    assert entry.gone and entry not in pool._entries
    assert _stdout(_warm_run(runner, KEY, lambda: _run([run_python], "print(7)"))) == 7


def test_warm_and_running_sandboxes_stay_within_the_cap() -> None:
    runner = SubprocessRunner(warm=1, cap=1)
    if runner.unavailable() is not None:
        pytest.skip(f"no sandbox on this host: {runner.unavailable()}")
    from byref.tools.code_mode.run_code import _child_source

    held, entered = threading.Event(), threading.Event()

    @tool
    def hold() -> str:
        """Wait until the test lets go."""
        entered.set()
        held.wait(scaled(20))
        return "let go"

    key: Key = (LIMITS, _child_source(), True)
    mode = CodeMode(runner=runner, limits=LIMITS)
    runner.warm_up(LIMITS, bootstrap=_child_source(), channel=True)
    pool = runner.pool
    assert pool is not None and pool.wait_ready(key, scaled(20))
    done: list[Part] = []
    worker = threading.Thread(target=lambda: done.append(
        _run([hold], "print(tools.hold())", tool_name="run_code", code_mode=mode)))
    worker.start()
    try:
        assert entered.wait(scaled(20))
        # The running sandbox fills the cap: no replacement is started while it runs.
        assert (pool.live, pool.started, pool.ready(key)) == (1, 1, 0)
    finally:
        held.set()
        worker.join(scaled(20))
    assert not done[0].is_error and "let go" in result_text(done[0])
    assert pool.wait_ready(key, scaled(20)) and pool.started == 2 and pool.peak == 1
    runner.close()
    assert pool.wait_for(lambda: pool.live == 0, scaled(30))


def test_the_warm_child_is_code_childs_own_program() -> None:
    # The prelude imports what the bootstrap imports and nothing of byref.
    from byref.tools.run_python.launch import warm_source

    source = warm_source(Path(code_child.__file__).read_text())
    assert "'msgspec'" in source and "byref" not in source.split("_code = compile")[0]


# Every limit the code's process is under, read from inside; the same for a cold and a warm run.
PROBE = """
import errno, json, os, resource, socket
seen = {name: resource.getrlimit(getattr(resource, name)) for name in (
    "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_CORE")}
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
for key in ("Seccomp", "NoNewPrivs", "CapEff", "CapBnd", "Uid", "Gid"):
    seen[key] = status[key].split()
def attempt(name, fn):
    try:
        fn()
        seen[name] = "allowed"
    except OSError as exc:
        seen[name] = errno.errorcode.get(exc.errno, str(exc.errno))
attempt("fork", lambda: os._exit(0) if os.fork() == 0 else None)
attempt("memfd", lambda: os.memfd_create("x"))
attempt("socketpair", lambda: socket.socketpair())
seen["disk"] = {p: os.statvfs(p).f_blocks * os.statvfs(p).f_frsize for p in ("/tmp", ".")}
stage = os.path.dirname(os.getcwd())  # the staging area's own path differs run to run
seen["mounts"] = sorted(line.split()[4].replace(stage, "<stage>")
                        for line in open("/proc/self/mountinfo"))
seen["pids"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
print(json.dumps(seen))
"""


def test_a_warm_run_is_under_every_limit_a_cold_one_is(runner: SubprocessRunner) -> None:
    limits = Limits(wall_seconds=60, memory_bytes=512 << 20, cpu_seconds=7, max_open_files=99,
                    disk_bytes=48 << 20)
    cold = _stdout(_run([make_run_python_tool(runner=SubprocessRunner(), limits=limits)], PROBE))
    warm_tool = make_run_python_tool(runner=runner, limits=limits)
    warm = _stdout(_warm_run(runner, (limits, BOOTSTRAP, False),
                             lambda: _run([warm_tool], PROBE)))
    assert warm == cold
    assert warm["RLIMIT_NOFILE"] == [99, 99] and warm["RLIMIT_AS"] == [512 << 20] * 2
    assert warm["Seccomp"] == ["2"] and warm["fork"] == "EAGAIN"
    assert warm["memfd"] == "ENOSYS" and warm["socketpair"] == "EPERM"


def test_a_warm_runs_wall_clock_starts_with_its_program(runner: SubprocessRunner) -> None:
    limits = Limits(wall_seconds=2)
    run_python = make_run_python_tool(runner=runner, limits=limits)
    key: Key = (limits, BOOTSTRAP, False)
    # However long the sandbox waited for its program, the clock starts with the program.
    part = _warm_run(runner, key, lambda: _run([run_python], "print('in time')"))
    assert _stdout_text(part) == "in time"
    stopped = _warm_run(runner, key, lambda: _run([run_python], "import time\ntime.sleep(60)"))
    assert stopped.is_error
    assert "Your program was stopped at its wall-clock limit (2s)" in str(stopped.rendered)


def _stdout_text(part: Part) -> str:
    assert not part.is_error, part.rendered
    text: str = decode(result_text(part))["stdout"]
    return text.strip()
