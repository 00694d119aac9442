"""Podman for the container tests (tests/container): the image built from the repository's
Containerfile on a local Debian base, and containers run from it.

No registry image can be pulled on the machines these tests run on, so the base is made by
`deploy/base.sh` (debootstrap from the Debian mirror, `podman import`ed once and kept in podman's
own storage by tag) and passed as `--build-arg BASE=…`; the Containerfile's own layers are
cached by podman too, so a second run builds nothing unless pyproject.toml or src/ changed.
Podman's default runtime (crun) cannot set a container's rlimits here: every podman command runs
with `--runtime runc` and every container with lowered nofile/nproc limits. Builds use the host's
network (the one that reaches PyPI). `unavailable()` says why these tests cannot run, or None.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_TAG = os.environ.get("BYREF_BASE_TAG", "localhost/byref-base:bookworm")
IMAGE = "localhost/byref-test:latest"
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


def podman(*args: str, timeout: float = 120, check: bool = True
           ) -> subprocess.CompletedProcess[str]:
    """One podman command (runc as the runtime), its output captured."""
    done = subprocess.run(["podman", "--runtime", "runc", *args], capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({done.returncode}): "
                           f"{done.stderr[-3000:]}")
    return done


def unavailable() -> str | None:
    """Why the container tests cannot run here (None when they can)."""
    for tool, how in (("podman", "apt-get install -y podman runc"),
                      ("runc", "apt-get install -y runc")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({how})"
    if os.geteuid() != 0:
        return "the container tests run podman as root (debootstrap and podman import need it)"
    try:
        podman("info", timeout=60)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"podman cannot run here: {exc}"
    has_base = podman("image", "exists", BASE_TAG, check=False).returncode == 0
    if shutil.which("debootstrap") is None and not has_base:
        return "debootstrap is not installed (apt-get install -y debootstrap) and no base image"
    return None


def base_image() -> str:
    """The local Debian base's tag: made by deploy/base.sh on first use (minutes), then kept."""
    done = subprocess.run([str(ROOT / "deploy" / "base.sh")], capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "BYREF_BASE_TAG": BASE_TAG})
    if done.returncode != 0:
        raise RuntimeError(f"deploy/base.sh failed: {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def build(context: Path, tag: str, *, containerfile: Path | None = None,
          args: dict[str, str] | None = None) -> float:
    """`podman build` (docker format, so HEALTHCHECK is kept) on the host's network; seconds."""
    started = time.monotonic()
    command = ["build", "--format", "docker", "--network", "host", "--layers", "-t", tag]
    for name, value in (args or {}).items():
        command += ["--build-arg", f"{name}={value}"]
    if containerfile is not None:
        command += ["-f", str(containerfile)]
    podman(*command, str(context), timeout=1800)
    return time.monotonic() - started


@contextlib.contextmanager
def _lock(name: str) -> Iterator[None]:
    """One builder at a time across pytest-xdist's workers (each waits for the other's image)."""
    import fcntl

    with open(f"/tmp/byref-podman-{name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield


def byref_image() -> str:
    """The repository's Containerfile built on the local base (cached layers), as IMAGE."""
    with _lock("build"):
        build(ROOT, IMAGE, args={"BASE": base_image()})
    return IMAGE


def image_size(tag: str) -> int:
    """The image's size in bytes, as podman counts it (every layer, uncompressed)."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())


def team_image(files: dict[str, Path | str], tag: str) -> str:
    """A team's image: a second stage FROM IMAGE that adds `files` under /opt/team (a Path is
    copied, a str written), as deploy/examples/Containerfile.team does with its own servers."""
    context = Path(os.environ.get("TMPDIR", "/tmp")) / f"byref-team-{os.getpid()}"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    for name, source in sorted(files.items()):
        data = source.read_bytes() if isinstance(source, Path) else source.encode()
        (context / name).write_bytes(data)
    (context / "Containerfile").write_text(
        f"FROM {IMAGE}\nUSER root\nCOPY . /opt/team/\nRUN rm /opt/team/Containerfile\n"
        "USER 10001\n")
    with _lock("build"):
        build(context, tag)
    shutil.rmtree(context, ignore_errors=True)
    return tag


@contextlib.contextmanager
def container(image: str, name: str, *run: str, command: tuple[str, ...] = ()
              ) -> Iterator[str]:
    """`podman run -d` (runc, lowered limits), removed on the way out; yields its name."""
    podman("rm", "-f", "-t", "0", name, check=False)
    podman("run", "-d", "--name", name, *ULIMITS, *run, image, *command)
    try:
        yield name
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def logs(name: str) -> str:
    """A container's output so far (for a failure's message)."""
    done = podman("logs", name, check=False)
    return (done.stdout + done.stderr)[-4000:]
