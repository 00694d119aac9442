"""The isolation `run_python` code runs in: it sees its work directory, its inputs, the interpreter.

The law: the code gets its own user, mount, pid, IPC, UTS and network namespaces, made by a
maintained tool — bubblewrap (`bwrap`) when installed, else util-linux `unshare` + `mount` +
`pivot_root` — never by syscalls of ours. Its root is an empty, read-only tree holding read-only
binds of only /usr (and the /bin, /lib… links into it), the interpreter's prefixes, three /etc
entries and five /dev nodes, its staged inputs and seed files (read-only), plus the only
writable places: /tmp, /dev/shm and the work directory, all on a tmpfs of the run's own whose
size is the run's disk budget — one tmpfs for the three under `unshare`; three, splitting the
budget (a quarter, a quarter, a half), under bwrap, whose binds cannot share one. /proc is
mounted fresh, so it lists only the sandbox's processes; the only network is a loopback of its
own (down, under unshare); no process in it holds a capability or can make a user namespace.
Whether the host allows all this is found by trying once (per tool set and interpreter), not by
guessing.

As root, RLIMIT_NPROC would never bite (the kernel exempts uid 0), so there the mounts are made
by root itself and the code runs as `nobody` inside a user namespace of its own."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from byref.errors import InvalidValue, OperatorError

NOBODY = 65534
_TOOL_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives")
_DEVICES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
              ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2"))
# Only ever run inside a user namespace of the sandbox: there it caps that namespace alone.
_NO_USERNS = "echo 0 > /proc/sys/user/max_user_namespaces"
_PROBE_OK = "byref-sandbox-ok"
_UNSHARE_TOOLS = ("sh", "mount", "umount", "pivot_root", "setpriv", "mkdir")
# Under bwrap: the share of the disk budget each writable place gets (see the docstring).
_BWRAP_SHARES = {"/tmp": 4, "/dev/shm": 4}


class IsolationUnavailable(OperatorError, RuntimeError):
    """This host cannot give run_python its sandbox; the message says what is missing."""

    def __init__(self, reason: str) -> None:
        super().__init__(developer_message(reason))
        self.reason = reason


def developer_message(reason: str) -> str:
    """What a developer is told when code cannot be isolated, and how to fix it."""
    return (f"run_python cannot isolate code on this host: {reason}. Install bubblewrap "
            "('bwrap') or util-linux 'unshare' with user namespaces enabled, or, for trusted "
            "local use only, pass SubprocessRunner(isolation='none').")


@dataclass(frozen=True, slots=True)
class Mount:
    """One mount inside the sandbox: its kind, where it appears, and its source."""
    kind: Literal["ro", "link", "proc", "dev", "scratch"]
    """'ro' (a bind of `source`), 'link' (a symlink to `source`), 'proc', 'dev', or 'scratch'
    (writable: the directory `source` of the run's tmpfs)."""
    dest: str
    source: str = ""


def plan_view(python_dirs: tuple[str, ...], work: Path, inputs: Path,
              seed: Path) -> list[Mount]:
    """What the child sees, parents before children (a bind must land on its parent's mount).

    /tmp, /dev/shm and the work directory are the run's tmpfs, gone with the run; the inputs
    and the seed (main.py and the manifest, which the init copies into the work directory) are
    read-only binds of the host's files.
    """
    view = [Mount("ro", "/usr", "/usr"), Mount("proc", "/proc"), Mount("dev", "/dev"),
            Mount("scratch", "/tmp", "tmp"), Mount("scratch", "/dev/shm", "shm")]
    for path in (*_LINKS, *_ETC):
        if os.path.islink(path):
            view.append(Mount("link", path, os.readlink(path)))
        elif os.path.exists(path):
            view.append(Mount("ro", path, path))
    view += [Mount("ro", d, d) for d in python_dirs]
    view += [Mount("scratch", str(work), "work"), Mount("ro", str(inputs), str(inputs)),
             Mount("ro", str(seed), str(seed))]
    return sorted(view, key=lambda m: Path(m.dest).parts)


@functools.cache
def interpreter_dirs(python: str) -> tuple[str, ...]:
    """The directories `python` needs (its prefixes, its binary), minus what /usr already has."""
    if python == sys.executable:
        found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                 os.path.dirname(os.path.realpath(sys.executable))]
    else:
        query = ("import os, sys; print('\\n'.join([sys.prefix, sys.base_prefix, sys.exec_prefix,"
                 " sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]))")
        done = subprocess.run([python, "-I", "-c", query], capture_output=True, text=True,
                              timeout=30, check=True)
        found = done.stdout.split("\n")[:5]
    found.append(os.path.dirname(os.path.abspath(python)))
    kept: list[str] = []
    for path in sorted({os.path.abspath(p) for p in found if p}, key=len):
        if path == "/":
            raise InvalidValue(f"the interpreter {python!r} lives at '/', which cannot be "
                             "shown alone")
        if not any(path == k or path.startswith(k + "/") for k in ["/usr", *kept]):
            kept.append(path)
    return tuple(kept)


class Sandbox:
    """Builds the command that runs an argv inside the sandbox, and knows whether it can."""

    def __init__(self, *, bwrap: str | None = "bwrap", unshare: str | None = "unshare") -> None:
        self.bwrap = bwrap
        self.unshare = unshare
        self.as_root = os.geteuid() == 0

    def backend(self, python: str) -> tuple[str, str]:
        """(name, path) of the tool the host allows; IsolationUnavailable if none."""
        key = (self.bwrap, self.unshare, self.as_root, python)
        if key not in _PROBED:
            _PROBED[key] = self._probe(python)
        found = _PROBED[key]
        if isinstance(found, str):
            raise IsolationUnavailable(found)
        return found

    def unavailable(self, python: str = sys.executable) -> str | None:
        """Why isolation cannot work here, or None when it can."""
        try:
            self.backend(python)
        except IsolationUnavailable as exc:
            return exc.reason
        return None

    def command(self, python: str, *, work: Path, inputs: Path, seed: Path,
                writable: Sequence[Path], private: Path, disk_bytes: int, disk_files: int,
                inner: list[str]) -> list[str]:
        """The argv that runs `inner` in a sandbox whose work directory is `work` (a tmpfs of
        `disk_bytes` and `disk_files` inodes, with /tmp and /dev/shm), showing `inputs` and
        `seed` read-only.

        `writable` are host directories the sandbox's init writes through a descriptor (as
        root, they are given to nobody); `private` is an empty directory out of the code's
        sight, for the sandbox's own files.
        """
        name, tool = self.backend(python)
        return self._build(name, tool, python, work, inputs, seed, writable, private,
                           (disk_bytes, disk_files), inner)

    def _build(self, name: str, tool: str, python: str, work: Path, inputs: Path, seed: Path,
               writable: Sequence[Path], private: Path, disk: tuple[int, int],
               inner: list[str]) -> list[str]:
        scratch, newroot = private / "scratch", private / "newroot"
        for path in (scratch, newroot):
            path.mkdir(parents=True)
        view = plan_view(interpreter_dirs(python), work, inputs, seed)
        if self.as_root:
            for path in writable:
                os.chown(path, NOBODY, NOBODY)
        if name == "bwrap":
            return _bwrap(tool, view, work, disk[0], inner)
        _skeleton(view, newroot)
        return _unshare(tool, view, work, newroot, scratch, disk, inner,
                        as_root=self.as_root)

    def _probe(self, python: str) -> tuple[str, str] | str:
        """Run a trivial program with each candidate tool; the reasons if none works."""
        if not sys.platform.startswith("linux"):
            return f"it needs Linux namespaces, and this is {sys.platform!r}"
        reasons = []
        for name, tool in (("bwrap", self.bwrap), ("unshare", self.unshare)):
            if tool is None:
                continue
            path = shutil.which(tool)
            failed = (f"{tool!r} was not found" if path is None
                      else self._refuses(name, path, python))
            if failed is None and path is not None:
                return name, path
            reasons.append(failed or "")
        return "; ".join(reasons) or "no sandbox tool was configured"

    def _refuses(self, name: str, path: str, python: str) -> str | None:
        if name == "bwrap":
            if self.as_root:
                # uid 0 is exempt from the process limit; the unshare path handles root.
                return "'bwrap' is not used as root"
            said = subprocess.run([path, "--version"], capture_output=True, text=True,
                                  check=False).stdout.split()
            if _version(said[-1] if said else "") < (0, 8):
                return f"{path!r} is older than bubblewrap 0.8 (no --disable-userns)"
        else:
            missing = [t for t in _UNSHARE_TOOLS if _which(t) is None]
            if missing:
                return f"{missing[0]!r} was not found (needed with {path!r})"
        with tempfile.TemporaryDirectory(prefix="byref-probe-") as tmp:
            work = Path(tmp, "work")
            for sub in ("inputs", "seed"):
                (work / sub).mkdir(parents=True)
            try:
                argv = self._build(name, path, python, work, work / "inputs", work / "seed",
                                   [], Path(tmp, "private"), (1 << 20, 64),
                                   [python, "-I", "-S", "-c", f"print({_PROBE_OK!r})"])
                done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                      env=minimal_env(work), stdin=subprocess.DEVNULL,
                                      check=False)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                return f"{path!r} could not start a sandbox ({exc})"
        if done.returncode == 0 and done.stdout.strip() == _PROBE_OK:
            return None
        said_ = " ".join((done.stderr or done.stdout).split())[-300:]
        return f"{path!r} could not make a sandbox (exit {done.returncode}: {said_!r})"


def _bwrap(bwrap: str, view: list[Mount], work: Path, disk_bytes: int,
           inner: list[str]) -> list[str]:
    # --as-pid-1: our init is pid 1, so bwrap exits only once the namespace is empty (its own
    # init would report the exit code first, while the rest is still being killed).
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--die-with-parent", "--new-session", "--disable-userns",
            "--as-pid-1", "--cap-drop", "ALL"]
    for m in view:
        if m.kind == "ro":
            argv += ["--ro-bind", m.source, m.dest]
        elif m.kind == "scratch":
            size = disk_bytes // _BWRAP_SHARES.get(m.dest, 2)
            argv += ["--perms", "1777", "--size", str(size), "--tmpfs", m.dest]
        elif m.kind == "link":
            argv += ["--symlink", m.source, m.dest]
        else:
            argv += [f"--{m.kind}", m.dest]
    # bwrap's sandboxed process holds no capabilities already; no setpriv needed.
    return [*argv, "--remount-ro", "/", "--chdir", str(work), "--", *inner]


def _unshare(unshare: str, view: list[Mount], work: Path, newroot: Path, scratch: Path,
             disk: tuple[int, int], inner: list[str], *, as_root: bool) -> list[str]:
    t = {name: _which(name) or name for name in _UNSHARE_TOOLS}
    script = _setup_script(view, newroot, scratch, disk, t, in_userns=not as_root)
    script += f"\ncd {shlex.quote(str(work))}\nexec \"$@\""
    spaces = ["--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child"]
    chain: list[str] = []
    if as_root:
        # Root builds the view, then the code runs as nobody in a user namespace of its own.
        # Changing uid clears the parent-death signal --kill-child set: --pdeathsig re-arms it.
        chain = [t["setpriv"], f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                 "--no-new-privs", "--pdeathsig", "KILL", "--", unshare, "--user",
                 "--map-root-user", "--",
                 t["sh"], "-c", _NO_USERNS + ' && exec "$@"', "byref-sandbox"]
    else:
        spaces = ["--user", "--map-root-user", *spaces]
    chain += [t["setpriv"], "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--"]
    # --pdeathsig: if this process dies mid-run, unshare dies too, and --kill-child ends the rest.
    return [t["setpriv"], "--pdeathsig", "KILL", "--", unshare, *spaces, "--", t["sh"], "-c",
            script, "byref-sandbox", *chain, *inner]


def _skeleton(view: list[Mount], newroot: Path) -> None:
    """Make every mount point and link on the host beforehand: far fewer execs in the script.

    A mount point lands in the directory it will be reached through: the skeleton itself, or a
    directory of the run's own that an earlier bind shows (the work dir under /tmp).
    """
    (newroot / ".old").mkdir()
    for m in view:
        if _in_scratch(view, m.dest):
            continue  # made on the run's tmpfs by the setup script
        if m.kind == "dev":
            at = _reached(view, newroot, m.dest)
            at.mkdir(parents=True, exist_ok=True)
            for name in _DEVICES:
                (at / name).touch()
            for name, target in _DEV_LINKS:
                (at / name).symlink_to(target)
            continue
        at = _reached(view, newroot, m.dest)
        at.parent.mkdir(parents=True, exist_ok=True)
        if m.kind == "link":
            at.symlink_to(m.source)
        elif m.kind in ("proc", "scratch") or os.path.isdir(m.source):
            at.mkdir(exist_ok=True)
        else:
            at.touch()


def _nearest_above(view: list[Mount], dest: str) -> Mount | None:
    above = [m for m in view if m.kind in ("ro", "scratch") and dest.startswith(m.dest + "/")]
    return max(above, key=lambda m: len(m.dest)) if above else None


def _in_scratch(view: list[Mount], dest: str) -> bool:
    nearest = _nearest_above(view, dest)
    return nearest is not None and nearest.kind == "scratch"


def _reached(view: list[Mount], newroot: Path, dest: str, scratch: Path | None = None) -> Path:
    """The path that `dest` in the sandbox is, once the mounts above it are in place: in the
    skeleton on the host, or (given `scratch`, the tmpfs's mount point) on the run's tmpfs."""
    nearest = _nearest_above(view, dest)
    if nearest is None:
        return Path(str(newroot) + dest)
    if nearest.kind != "scratch" or scratch is None:
        raise InvalidValue(f"cannot show {dest!r} inside the read-only {nearest.dest!r}")
    return scratch / nearest.source / dest[len(nearest.dest) + 1:]


def _setup_script(view: list[Mount], newroot: Path, scratch: Path, disk: tuple[int, int],
                  t: dict[str, str], *, in_userns: bool) -> str:
    """A shell script, run in the new namespaces, that mounts the run's tmpfs, binds the view
    and pivots into it."""
    q = shlex.quote
    mount, root = t["mount"], str(newroot)
    # One tmpfs holds /tmp, /dev/shm and the work directory: the disk budget is for all three.
    dirs = sorted({str(scratch / m.source) for m in view if m.kind == "scratch"}
                  | {str(_reached(view, newroot, m.dest, scratch)) for m in view
                     if _in_scratch(view, m.dest)})
    lines = ["set -eu", f"{mount} --bind {q(root)} {q(root)}",  # pivot_root wants a mount point
             f"{mount} -t tmpfs -o size={disk[0]},nr_inodes={disk[1]},mode=0755,"
             f"nosuid,nodev byref-scratch {q(str(scratch))}",
             f"{t['mkdir']} -p -m 1777 {' '.join(q(d) for d in dirs)}"]
    for m in view:
        at = q(root + m.dest)  # through the mounts above it, once they are in place
        if m.kind == "ro":
            opts = ",".join(["ro", "nosuid", "nodev", *_kept_flags(m.source)])
            lines.append(f"{mount} --bind -o {opts} {q(m.source)} {at}")
        elif m.kind == "scratch":
            lines.append(f"{mount} --bind -o nosuid,nodev {q(str(scratch / m.source))} {at}")
        elif m.kind == "proc":
            lines.append(f"{mount} -t proc -o nosuid,nodev,noexec proc {at}")
        elif m.kind == "dev":
            lines += [f"{mount} --bind -o nosuid,{','.join(_kept_flags(f'/dev/{name}'))} "
                      f"/dev/{name} {at}/{name}" for name in _DEVICES]
    if in_userns:
        lines.append(_NO_USERNS.replace("/proc", q(root + "/proc"), 1))
    # The old root is detached, not removed: an empty /.old is all that is left of it.
    lines += [f"cd {q(root)}", f"{t['pivot_root']} . .old", f"{t['umount']} -l /.old",
              f"{mount} -o remount,ro,bind /"]
    return "\n".join(lines)


def _kept_flags(path: str) -> list[str]:
    """Flags of the source's mount that a user namespace may not clear on its bind."""
    flags = os.statvfs(path).f_flag
    kept = ["noexec"] if flags & os.ST_NOEXEC else []
    kept.append("noatime" if flags & os.ST_NOATIME else
                "relatime" if flags & os.ST_RELATIME else "strictatime")
    return kept + (["nodiratime"] if flags & os.ST_NODIRATIME else [])


def _which(name: str) -> str | None:
    return shutil.which(name, path=_TOOL_PATH) if "/" not in name else shutil.which(name)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def minimal_env(work: Path) -> dict[str, str]:
    """The child's whole environment: an allowlist, so no host secret rides along."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8",
            "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
            # Thread pools count against the process limit; a few threads are plenty here.
            "OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}


def kill_namespace(launcher: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGKILL the sandbox's init (the kernel then kills every process in its pid namespace),
    and wait for the launcher, which exits only once that namespace is empty."""
    try:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text()
    except OSError:
        children = ""
    for pid in children.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    try:
        launcher.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGKILL)  # its --kill-child/--die-with-parent follow
        launcher.wait(timeout=grace)


_PROBED: dict[tuple[str | None, str | None, bool, str], tuple[str, str] | str] = {}
