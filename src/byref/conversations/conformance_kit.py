"""The battery's kit: what a case is given and the checks it raises with (`conformance` holds the
cases and the runner; `conformance_processes` the cases that need a second process)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from byref.conversations.port import ConversationBusy, ConversationState, SeqConflict
from byref.errors import DeveloperError
from byref.store import Scope

PROCESS_TIMEOUT = 120.0
TTL = 100.0
"""The ttl the battery's states are created with (seconds of the battery's own clock)."""


class CaseFailed(DeveloperError):
    """A law did not hold."""


@dataclass(frozen=True)
class StateBattery:
    """How the battery makes, ages and reopens one implementation's state; `declared` maps a case
    name to why that implementation is known to fail it."""

    name: str
    create: Callable[[], ConversationState]
    """A usable state with ttl=TTL (cases use their own scopes, so storage may be shared)."""
    advance: Callable[[ConversationState, float], None]
    """Move that state's clock forward by seconds."""
    reopen: Callable[[ConversationState], Callable[[], ConversationState]] | None = None
    declared: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Kit:
    """What a case is given: the state, a token unique to this run, its clock and its opener."""

    state: ConversationState
    token: str
    advance: Callable[[float], None]
    reopen: Callable[[], ConversationState] | None

    def scope(self, label: str = "main") -> Scope:
        """A scope unique to this run (so cases never see each other's conversations)."""
        return Scope(f"battery-{self.token}", "principal", label)

    def opener(self) -> Callable[[], ConversationState]:
        """The picklable opener of a second instance; raises CaseFailed when the harness has
        none."""
        if self.reopen is None:
            raise CaseFailed("this case needs a second process (the harness's reopen)")
        return self.reopen


@dataclass(frozen=True)
class Case:
    """One law (`law`), the function that checks it, and whether it needs a second process."""

    name: str
    law: str
    run: Callable[[Kit], None]
    processes: bool = False


@dataclass(frozen=True)
class Result:
    """How one case went for one implementation."""

    name: str
    law: str
    outcome: str
    """passed, failed, declared (ran and failed, with the harness's reason) or stale."""
    detail: str = ""


def check(ok: bool, what: str) -> None:
    """Raise CaseFailed saying `what` unless `ok`."""
    if not ok:
        raise CaseFailed(what)


def equal(got: Any, want: Any, what: str) -> None:
    """Raise CaseFailed naming both values unless `got == want`."""
    if got != want:
        raise CaseFailed(f"{what}: expected {want!r}, got {got!r}")


def line(seq: int, size: int = 40) -> bytes:
    """The line the battery writes at `seq`: its seq, then filler, then a newline."""
    head = f'{{"seq":{seq},"x":"'.encode()
    return head + b"y" * max(0, size - len(head) - 3) + b'"}\n'


def conflicts(fn: Callable[[], object]) -> bool:
    """Whether `fn` raised SeqConflict."""
    try:
        fn()
    except SeqConflict:
        return True
    return False


def conflicts_busy(fn: Callable[[], object]) -> bool:
    """Whether `fn` raised ConversationBusy."""
    try:
        fn()
    except ConversationBusy:
        return True
    return False


def reap(procs: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Join each process (killed if it overstays PROCESS_TIMEOUT, then CaseFailed)."""
    for proc in procs:
        proc.join(PROCESS_TIMEOUT)
        if proc.is_alive():
            proc.kill()
            proc.join(10)
            raise CaseFailed(f"child process {proc.pid} overstayed {PROCESS_TIMEOUT:.0f}s")
