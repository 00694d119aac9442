"""The sandbox's init (its pid 1): a program run by itself, `python -I -S -c <this file's text>`.

It imports nothing of byref, and no json (its `re` would cost ~25 ms a run): its config comes
as hex of `marshal` data (plain ints, strs, lists and dicts), and so goes its report. The law:
it copies main.py and the manifest from the read-only seed into the work directory (a warm
child, started before its program is known, copies them itself once given it), makes
itself untraceable (not dumpable: the code can neither ptrace it nor open its /proc files),
forks the code's process under the run's rlimits and syscall filter, and reaps orphans. When
the code's process has exited it kills whatever is left in the namespace, copies the output
files (regular files with UTF-8 names, bounded in count and bytes) through a descriptor the
code never holds, and reports on a pipe the code never holds: the exact wait status (an exit
code cannot tell a signal from `sys.exit(128 + n)`), the files, and the free space left on the
run's tmpfs (so a full disk is named as the limit it is).
"""

from __future__ import annotations

import contextlib
import ctypes
import marshal
import os
import resource
import signal
import stat
import sys
from typing import Any

_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 38, 22, 2
_MAX_NOTES = 20
_INIT_MEMORY = 256 << 20  # the init's own address space: an interpreter, ctypes, 1 MiB buffers


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def main(argv: list[str]) -> None:
    """Run the code given after '--' under the config in argv[1]; report on its fd."""
    c = marshal.loads(bytes.fromhex(argv[1]))
    inner = argv[argv.index("--") + 1:]
    fds = c["fds"]
    keep = sorted(fd for fd in fds.values() if fd >= 0)
    os.closerange(3, keep[0])
    for low, high in zip(keep, [*keep[1:], 1024], strict=True):
        os.closerange(low + 1, high)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    program = b""
    if fds["filter"] >= 0:
        program = _read_all(fds["filter"])
        keep.remove(fds["filter"])
    if not c["warm"]:  # a warm child copies them itself once it is given its program
        for name in ("main.py", "inputs.json"):
            with open(os.path.join(c["seed"], name), "rb") as src, open(name, "wb") as dst:
                dst.write(src.read())
    os.makedirs(c["outputs"], exist_ok=True)
    _limit(c, own=True)
    pid = os.fork()
    if pid == 0:
        _become_code(c, fds, keep, libc, program, inner)
    os.close(fds["out"])
    os.close(fds["err"])
    for fd in _code_only(fds):  # the code's alone: the channel closes when the code exits
        os.close(fd)
    while True:
        got, wait_status = os.wait()
        if got == pid:
            break
    if os.getpid() == 1:  # never outside a pid namespace: -1 would be every process we may kill
        with contextlib.suppress(ProcessLookupError):  # nothing else was left
            os.kill(-1, signal.SIGKILL)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
    report: dict[str, Any] = {"wait": wait_status, **_collect(c, fds["collect"])}
    if c["scratch"]:
        report["free"] = min(_free(path) for path in c["scratch"])
    os.write(fds["status"], marshal.dumps(report))


def _become_code(c: dict[str, Any], fds: dict[str, int], keep: list[int], libc: Any,
                 program: bytes, inner: list[str]) -> None:
    os.dup2(fds["out"], 1)
    os.dup2(fds["err"], 2)
    mine = _code_only(fds)
    for fd in keep:
        if fd not in mine:  # code mode's tool channel (and a warm child's pipes) stay open
            os.close(fd)
    for name in ("PWD", "OLDPWD"):  # set by the shells and bwrap on the way: not the allowlist
        os.environ.pop(name, None)
    _limit(c, own=False)
    if program:
        buf = ctypes.create_string_buffer(program, len(program))
        prog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
        if (libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                or libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0)):
            os.write(2, b"byref sandbox: the syscall filter could not be loaded (errno %d)\n"
                     % ctypes.get_errno())
            os._exit(126)
    os.execv(inner[0], inner)


def _code_only(fds: dict[str, int]) -> list[int]:
    """The descriptors only the code's process keeps: its tool channel, a warm child's pipes."""
    return [fds[name] for name in ("channel", "go", "ready") if fds.get(name, -1) >= 0]


def _limit(c: dict[str, Any], *, own: bool) -> None:
    """The run's rlimits: on the code's process, or (own) the ones that bind the init too."""
    fsize, nproc = c["file_bytes"], c["processes"]
    # The init's soft limit is its own; its hard limit leaves the code's to be set below it.
    memory = (_INIT_MEMORY, max(_INIT_MEMORY, c["memory"])) if own else (c["memory"],) * 2
    pairs = [(resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_FSIZE, fsize, fsize),
             (resource.RLIMIT_NPROC, nproc, nproc), (resource.RLIMIT_AS, *memory)]
    if not own:
        pairs += [(resource.RLIMIT_CPU, c["cpu"], c["cpu"] + 1),
                  (resource.RLIMIT_NOFILE, c["open_files"], c["open_files"])]
    for res, soft, hard in pairs:
        if soft >= 0:
            resource.setrlimit(res, (soft, hard))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _free(path: str) -> int:
    st = os.statvfs(path)
    return 0 if st.f_favail == 0 else st.f_bavail * st.f_frsize


def _collect(c: dict[str, Any], into: int) -> dict[str, Any]:
    """Copy the output files into the host's directory `into`, as <index>/<name>."""
    files: list[str] = []
    refused: list[list[str]] = []
    notes: list[str] = []
    out: dict[str, Any] = {"files": files, "refused": refused, "notes": notes}
    try:
        mode = os.lstat(c["outputs"]).st_mode
    except FileNotFoundError:
        return out  # the code removed it: nothing to read
    if not stat.S_ISDIR(mode):
        # A link to the host's files would be read as the host sees it: read nothing.
        notes.append("the output directory was replaced, so nothing was read back")
        return out
    total = 0
    for dirpath, dirs, names in os.walk(c["outputs"]):
        dirs.sort()
        for name in sorted(names):
            shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                # A symlink would be read as the host sees it; a FIFO would block the read.
                kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                if len(notes) < _MAX_NOTES:  # the report must fit the pipe it is written to
                    notes.append(f"{shown!r} is {kind} and was not read back")
                continue
            if shown != name:
                if len(refused) < _MAX_NOTES:
                    refused.append([shown, "its name is not UTF-8, so it cannot be named in "
                                           "a result; give output files UTF-8 names."])
                continue
            total += info.st_size
            if len(files) >= c["max_files"] or total > c["max_bytes"]:
                out["stopped"] = ("output-files" if len(files) >= c["max_files"]
                                  else "output-bytes")
                return out
            try:
                _copy(path, into, str(len(files)), name)
            except OSError as exc:  # the code took its own read permission away, say
                if len(refused) < _MAX_NOTES:
                    refused.append([shown, f"it could not be read back ({exc.strerror}); leave "
                                           "output files readable."])
                continue
            files.append(name)
    return out


def _copy(path: str, into: int, slot: str, name: str) -> None:
    src = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with contextlib.suppress(FileExistsError):  # left by a file that could not be read
        os.mkdir(slot, dir_fd=into)
    folder = os.open(slot, os.O_RDONLY | os.O_DIRECTORY, dir_fd=into)
    try:
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=folder)
        try:
            while chunk := os.read(src, 1 << 20):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
        finally:
            os.close(dst)
    finally:
        os.close(src)
        os.close(folder)


if __name__ == "__main__":
    main(sys.argv)
