"""One scope's conversation in the gateway: its record, lock, listen bus and open connections.

Owns `ScopeState`: the transcript Message refs address (kept through the conversation state
port), the working set its clients were last told, and the connections to tell when that
changes. The law: a conversation's record is written through the state port once a call
(`persist`), one batch of lines, working set and usage evidence; a failed write is the
operator's and the lines stay in memory (still answering refs) for the next batch. A connection
is forgotten when it closes.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import ToolsListChanged

from byref.conversations import ConversationError, ConversationTranscript, SeqConflict
from byref.discovery.declaring.usage import SearchUsage, UsageFold, UsageLog
from byref.gateway.config.file import Grant
from byref.harness.session import Session
from byref.store import Scope
from byref.transcript import Transcript, fresh_origin

_CONNECTIONS_KEPT = 64
TRANSCRIPT_CACHE = 32
"""Decoded messages a scope keeps: the working set reads only the newest, refs mostly recent
ones; measured, a larger cache only raises the RSS a session starts with (cache=0 is no lower)."""


def _transcript(spill: Path | None = None) -> Transcript:
    # A scope state made by hand (not through Scopes) records in memory, spilled.
    return Transcript(origin=fresh_origin(), spill=True if spill is None else spill,
                      cache=TRANSCRIPT_CACHE)


@dataclass(eq=False)
class ScopeState:
    """One scope's conversation in the gateway: its transcript, lock, listen bus, session,
    working set as last declared, and the connections to tell of changes."""

    scope: Scope
    transcript: Transcript = field(default_factory=_transcript)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)
    call_session: tuple[int, Session] | None = None
    """(toolbox version, the `Session` over it); dropped when the toolbox is rebuilt."""
    stable_session: tuple[int, Session] | None = None
    """The same over the toolbox's stable face (2026-07-28 clients' calls)."""
    declared: tuple[str, ...] = ()
    """The working set this scope's clients were last told about (a change is announced)."""
    usage_logged: int = 0
    """Usage pairs of this conversation already in the usage log (kept with its record)."""
    touched: float = field(default_factory=time.time)
    """When the record was last written or opened (an idle one past its ttl has expired)."""
    grant: Grant | None = None
    """The restricting grant this conversation was opened under (None: it sees every tool)."""
    artifacts: Scope | None = None
    """Where this conversation's stored results live: its owner's scope (`owned`), not the
    session's, so a Blob ref keeps its meaning when the session that made it is gone (a
    restart; over stdio, the next process: `Scopes.stdio_owner`). Message refs are always the
    conversation's."""
    owner: str | None = None
    """The owner (`bearer.owner`, the SDK's client_id) whose token opened it; None over stdio."""
    sessions: set[int] = field(default_factory=set)
    """Open sessions using this conversation (by connection identity); the last one to close
    releases it."""
    _connections: OrderedDict[int, Connection] = field(default_factory=OrderedDict)
    """Open connections with a channel for notifications, by identity (held, so ids stay)."""
    _saved_declared: tuple[str, ...] = ()
    _usage_folded: int = 0
    _usage_pending: list[tuple[str, str]] = field(default_factory=list)
    _usage_fold: tuple[Transcript, UsageFold] | None = None
    """The usage evidence folded so far, and the record it was folded from (a reopened record
    starts a new fold)."""

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)
        self._saved_declared = self.declared
        if self.artifacts is None:  # set by `Scopes.for_request`; else the conversation itself
            self.artifacts = self.scope

    @property
    def store_scope(self) -> Scope:
        """The scope its artifacts are put and read in (`artifacts`)."""
        assert self.artifacts is not None
        return self.artifacts

    # -- after a call --------------------------------------------------------------------------
    async def settle(self, working_set: Sequence[str], *, connection: Connection | None = None,
                     usage: UsageLog | None = None) -> bool:
        """What a call leaves in this conversation, in order: its clients told of a changed
        working set (`connection`, the caller's, is kept to be told later too), the usage
        evidence since the last activation appended to `usage` (given after a successful
        activation only), and the record written (`persist`). Returns whether the working set
        changed (so replicas are told, after the write)."""
        changed = await self.declare(working_set, connection)
        if usage is not None:
            await anyio.to_thread.run_sync(usage.append, self._usage_news())
        await self.persist()
        return changed

    async def declare(self, working_set: Sequence[str],
                      connection: Connection | None = None) -> bool:
        """Tell this scope's clients of `working_set` if it is not what they were last told;
        returns whether it changed."""
        now = tuple(working_set)
        if now == self.declared:
            return False
        self.declared = now
        # A working set changes only a handshake-era client's list; a 2026-07-28 client's
        # lists stay put through its requests, so its listeners are not told.
        await self.announce(connection, lists=False)
        return True

    def _usage_news(self) -> list[SearchUsage]:
        # Only the messages since the last activation; none the usage log already holds.
        held = self._usage_fold
        if held is None or held[0] is not self.transcript:
            held = self._usage_fold = (self.transcript, UsageFold())
        return self.unlogged(held[1].catch_up(self.transcript))

    # -- the record ----------------------------------------------------------------------------
    def unlogged(self, found: Sequence[SearchUsage]) -> list[SearchUsage]:
        """Of the usage evidence a fold of this record just found (in order, from its origin),
        what the usage log does not hold yet; it is saved with the record at `persist`."""
        skip = max(0, self.usage_logged - self._usage_folded)
        self._usage_folded += len(found)
        fresh = list(found[skip:])
        self.usage_logged += len(fresh)
        self._usage_pending.extend((u.query, u.tool) for u in fresh)
        return fresh

    def _take(self) -> tuple[tuple[str, ...] | None, list[tuple[str, str]]]:
        """What the next batch saves besides the lines: a changed working set, new usage."""
        declared = self.declared if self.declared != self._saved_declared else None
        usage, self._usage_pending = self._usage_pending, []
        return declared, usage

    def _saved(self, declared: tuple[str, ...] | None) -> None:
        if declared is not None:
            self._saved_declared = declared
        assert isinstance(self.transcript, ConversationTranscript)
        self.touched = self.transcript.lines.state.clock()

    def _flush(self) -> None:
        transcript = self.transcript
        if not isinstance(transcript, ConversationTranscript):
            return
        declared, usage = self._take()
        try:
            transcript.lines.flush(working_set=declared, usage=usage)
        except BaseException:
            self._usage_pending[:0] = usage  # kept for the next flush
            raise
        self._saved(declared)

    @property
    def unsaved(self) -> bool:
        """Whether lines, usage or the declared working set are waiting to be written to the
        state."""
        transcript = self.transcript
        return isinstance(transcript, ConversationTranscript) and bool(
            transcript.lines.pending or self._usage_pending or self.declared
            != self._saved_declared)

    async def persist(self) -> None:
        """Write this call's messages, working set and usage evidence through the state port as
        one batch (off the event loop when the state is remote). A failure is the operator's:
        the lines stay in memory (still answering refs here) and go with the next batch."""
        if not self.unsaved:
            return
        transcript = self.transcript
        assert isinstance(transcript, ConversationTranscript)
        # The batch is taken here, on the loop; only a remote round trip runs in a thread.
        declared, usage = self._take()
        write = functools.partial(transcript.lines.flush, working_set=declared, usage=usage)
        try:
            if transcript.lines.state.remote:
                await anyio.to_thread.run_sync(write)
            else:
                write()
        except SeqConflict as exc:
            self._usage_pending[:0] = usage
            # Another process continued this record: two gateways on one --conversation, or
            # replicas sharing a principal's conversation (not supported: one writer each).
            print(f"byref gateway: conversation {str(self.scope)!r} is being written by another "
                  f"process too; run one gateway per conversation. Its newest messages are "
                  f"kept in this process only: {exc}", file=sys.stderr)
        except (ConversationError, OSError) as exc:
            self._usage_pending[:0] = usage
            print(f"byref gateway: conversation {str(self.scope)!r} not saved (kept in memory, "
                  f"retried with the next call): {exc}", file=sys.stderr)
        else:
            self._saved(declared)

    def close(self) -> None:
        """Save what is unsaved and release the record's memory."""
        try:
            if self.unsaved:
                self._flush()
        finally:
            self.transcript.close()
            self.call_session = self.stable_session = None

    # -- connections ---------------------------------------------------------------------------
    def remember(self, connection: Connection) -> None:
        """Keep an open connection to notify it of list changes; forgotten when it closes."""
        if not connection.has_standalone_channel:
            return  # a 2026-07-28 request's own connection: its client listens on the bus
        key = id(connection)
        if key not in self._connections:
            connection.exit_stack.callback(self.forget, connection)
        self._connections[key] = connection
        self._connections.move_to_end(key)
        while len(self._connections) > _CONNECTIONS_KEPT:
            self._connections.popitem(last=False)

    def forget(self, connection: Connection) -> None:
        """Stop telling `connection` of list changes."""
        if self._connections.get(id(connection)) is connection:
            del self._connections[id(connection)]

    @property
    def connections(self) -> int:
        """How many connections are kept for notifications."""
        return len(self._connections)

    async def announce(self, current: Connection | None = None, *, lists: bool = True) -> None:
        """Tell every client of this scope that the tool list changed, in both generations
        (`lists=False`: handshake-era connections only; a working set is declared to them
        alone, so a 2026-07-28 listener hears only of changes to the lists it reads)."""
        if lists:
            await self.bus.publish(ToolsListChanged())
        if current is not None:
            self.remember(current)
        for connection in list(self._connections.values()):
            try:
                with anyio.move_on_after(5):
                    await connection.send_tool_list_changed()
            except Exception:  # it cannot take a notice: it is gone
                self.forget(connection)
