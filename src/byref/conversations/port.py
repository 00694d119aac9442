"""The conversation-state port: one conversation's record (its transcript lines), its declared
working set and its usage evidence, kept by scope.

The law every implementation keeps (the battery in `byref.conversations.conformance` checks it):
- `append` is all or nothing and only ever continues the record: the batch's first seq must be the
  record's next one (else `SeqConflict`, nothing written), so a line, once acknowledged, names one
  seq forever and is read back byte for byte; a crash mid-write leaves the record as it was.
- Conversations are apart by scope (compared exactly, as `Scope` is); one never sees another's.
- Retention: a conversation idle for `ttl` seconds is expired — its lines are gone, and the seq
  range it held is remembered, so a ref into it is told "expired", not "never existed". Opening an
  expired conversation starts a new record after that range.
- `append_numbered` is the shared writers' append: the state gives the line the record's next
  seq (written into it) in one step, so concurrent writers of one record all land, in some order,
  each at the seq it was told.
- `hold` is exclusive between holders and ends with its holder's process, however it ends.
- The working set and the usage evidence are saved with the record (the same transaction when
  given to `append`), so a resumed conversation declares what it declared and never logs the
  same evidence twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from byref.conversations.tasks import TaskRecords
from byref.errors import OperatorError
from byref.store import Scope

SHARED_CONVERSATION = "gateway"
"""The conversation id of a principal's own scope: the conversation its sessions share, and
where the gateway keeps its artifacts, so a ref outlives any one session or restart."""

DEFAULT_TTL = 7 * 24 * 3600.0
"""Seconds a conversation may sit idle before it expires (a week; the config's conversationTtl)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """What is known about one conversation when it is opened or looked up."""

    scope: Scope
    origin: int
    """The seq of its first message."""
    length: int
    """How many lines it holds."""
    expires_at: float | None
    working_set: tuple[str, ...] = ()
    usage: int = 0
    """How many (query, tool) pairs of usage evidence it holds."""
    expired: tuple[int, int] | None = None
    """The seq range (first, last) of an earlier record under this scope that expired."""

    @property
    def next_seq(self) -> int:
        """The seq the next appended line must have."""
        return self.origin + self.length


class ConversationError(OperatorError):
    """The state store cannot do what was asked (the text says why and what to do)."""


class SeqConflict(ConversationError):
    """An append did not continue the record: another writer appended first, or the record is
    gone (expired or deleted). Nothing was written."""


class ConversationBusy(ConversationError):
    """Another process holds the conversation (`ConversationState.hold`)."""


class Hold(Protocol):
    """A conversation held for one process's lifetime (`ConversationState.hold`)."""

    def release(self) -> None:
        """Let another process hold it; idempotent."""
        ...


class ConversationState(Protocol):
    """Where conversations live. Thread-safe; every method is one short transaction."""

    ttl: float | None
    remote: bool
    """True when a call is a network round trip (callers run it off the event loop)."""
    durable: bool
    """True when conversations outlive this process (and this instance)."""
    clock: Callable[[], float]
    """Seconds (wall clock) that expiry is measured in."""
    tasks: TaskRecords
    """The MCP tasks kept beside the conversations (`byref.conversations.tasks`)."""

    def open(self, scope: Scope, origin: int) -> Conversation:
        """The live conversation of `scope`, touched; created starting at `origin` when there is
        none (or it expired: then at no lower than one past the expired range)."""
        ...

    def find(self, scope: Scope) -> Conversation | None:
        """The live conversation of `scope` (not touched), or None."""
        ...

    def conversations(self, tenant: str | None = None,
                      principal: str | None = None) -> list[Conversation]:
        """The live conversations (of `tenant`, and of `principal`, when given: compared
        exactly), sorted by scope; none touched. For readers that open what a store holds."""
        ...

    def append(self, scope: Scope, first_seq: int, lines: Sequence[bytes], *,
               working_set: Sequence[str] | None = None,
               usage: Sequence[tuple[str, str]] = ()) -> None:
        """Add `lines` (seqs first_seq, first_seq+1, …), and optionally replace the working set
        and add usage pairs, in one transaction; touches the conversation."""
        ...

    def append_numbered(self, scope: Scope, head: bytes, tail: bytes) -> int:
        """Add one line, `head + <its seq in decimal> + tail`, at the record's next seq, whoever
        else appends meanwhile, and return that seq: the state numbers it, so shared writers
        (replicas) never race for a seq and never retry. Touches the conversation; raises
        SeqConflict (nothing written) when the record is not live."""
        ...

    def save(self, scope: Scope, *, working_set: Sequence[str] | None = None,
             usage: Sequence[tuple[str, str]] = ()) -> None:
        """Replace the working set and add usage pairs of the live record, at whatever length
        it has (a shared record's writers need not agree on one); raises SeqConflict when the
        record is not live."""
        ...

    def lines(self, scope: Scope, first_seq: int, count: int) -> list[bytes]:
        """Up to `count` lines from `first_seq` (fewer past the end; none when `first_seq` is
        not in the record, or the record is dead): `[i]` is always the line at first_seq + i."""
        ...

    def usage(self, scope: Scope) -> list[tuple[str, str]]:
        """The conversation's usage evidence, oldest first."""
        ...

    def delete(self, scope: Scope) -> bool:
        """Forget the conversation entirely (no expired range kept); True if it existed."""
        ...

    def hold(self, scope: Scope) -> Hold:
        """Hold `scope` as this process's, until released or the process ends (even by
        SIGKILL); raises ConversationBusy when another holder has it. For a single writer (a
        stdio gateway resuming a conversation); replicas share records and hold nothing."""
        ...

    def sweep(self) -> int:
        """Expire every conversation idle past its ttl (their lines are deleted); how many."""
        ...

    def close(self) -> None:
        """Release connections and files; the state is unusable after."""


def busy_text(scope: Scope) -> str:
    """The operator's one line when a conversation is held by another process."""
    return (f"conversation {scope.conversation!r} ({str(scope)!r}) is in use by another byref "
            "gateway; stop that one, resume a different --conversation ID, or run both as "
            "replicas (byref.replicas with PostgreSQL state).")

