"""The syscall filter run_python's code runs under, built by libseccomp (through `pyseccomp`).

The law: everything the runner never needs is refused with EPERM — tracing and reading other
processes, mounts and namespaces, kernel keys, BPF, perf, modules, kexec, reboot, io_uring
(whose operations no filter sees) — and a new process is refused with EAGAIN, as the process
limit refuses it: one process (any number of threads) is what lets a single address-space
limit hold for the whole run. clone3 answers ENOSYS, so the C library falls back to clone,
whose flags the filter can read. So is every way to make the host hold memory outside that
address space and the run's tmpfs (`HOLDS_HOST_MEMORY`): memfd files (ENOSYS, as a kernel
without them answers, so libraries fall back to files), SysV and POSIX IPC, sockets of any
family (code mode's channel is inherited, never made), descriptors passed in flight, pinned
pipe pages, inotify watches, and grown pipe buffers; what is left — pipes of 64 KiB — the
run's descriptor limit bounds. The program is compiled once per process, here, and loaded by
the sandbox's init into the code's process only; where libseccomp is missing the filter is
absent and `unavailable()` says why.
"""

from __future__ import annotations

import errno
import functools
import os

# Refused outright: none of these is needed to compute over files.
DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
    "fsconfig", "fspick", "mount_setattr", "unshare", "setns",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "acct", "quotactl",
    "syslog", "iopl", "ioperm", "personality", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "fanotify_init", "lookup_dcookie",
)
# Each would make the host hold memory outside the run's address space and tmpfs.
HOLDS_HOST_MEMORY = (
    "shmget", "msgget", "semget", "mq_open", "socket", "socketpair", "sendmsg", "sendmmsg",
    "vmsplice", "inotify_init", "inotify_init1",
)
# As a kernel without them answers.
ABSENT = ("clone3", "memfd_create", "memfd_secret")
_F_SETPIPE_SZ = 1031
# A new process, as opposed to a thread: refused as the process limit refuses it.
FORKS = ("fork", "vfork")
_CLONE_THREAD = 0x00010000


@functools.cache
def program() -> bytes | str:
    """The filter as a BPF program (bytes), or why it cannot be built here (str)."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: no libseccomp
        return f"libseccomp's Python binding could not load ({exc})"
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        for name in (*DENIED, *HOLDS_HOST_MEMORY):
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        flt.add_rule(sc.ERRNO(errno.EPERM), "fcntl", sc.Arg(1, sc.EQ, _F_SETPIPE_SZ))
        for name in FORKS:
            flt.add_rule(sc.ERRNO(errno.EAGAIN), name)
        flt.add_rule(sc.ERRNO(errno.EAGAIN), "clone",
                     sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
        for name in ABSENT:
            flt.add_rule(sc.ERRNO(errno.ENOSYS), name)
        with os.fdopen(os.memfd_create("byref-seccomp"), "w+b") as sink:
            flt.export_bpf(sink)
            sink.seek(0)
            return sink.read()
    except (OSError, ValueError) as exc:
        return f"libseccomp could not build the filter ({exc})"


def unavailable() -> str | None:
    """Why no syscall filter can be applied on this host, or None when it can."""
    built = program()
    return built if isinstance(built, str) else None
