"""The state battery's kit: what a case is given, over the kit every battery shares
(`byref.battery`: the checks a case raises with, `reap`); `conformance` holds the cases and the
runner, `conformance_processes` the cases that need a second process."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from byref.battery import CaseFailed
from byref.conversations.port import ConversationBusy, ConversationState, SeqConflict
from byref.store import Scope

TTL = 100.0
"""The ttl the battery's states are created with (seconds of the battery's own clock)."""


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
