"""A conversation's record as a `Transcript`: its lines kept by a `ConversationState`.

`ConversationLines` is the transcript's line holder over the port. Appends wait in memory until
`flush()` writes them as one batch (one transaction, with the working set and usage evidence of
the same call), so a call costs one write, not one per message; a line not yet flushed is read
from memory, an older one from the state (a block at a time, since replays read in order). What
memory holds is bounded: the unflushed lines of calls in flight, one read block, and the
transcript's own cache of decoded messages. `ConversationTranscript` adds the refusal for a ref
into a record that expired.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import msgspec

from byref.conversations.port import Conversation, ConversationState, SeqConflict
from byref.errors import InvalidValue, MisuseError
from byref.transcript import (
    DEFAULT_CACHE,
    Message,
    Part,
    Role,
    Transcript,
    TranscriptLookupError,
)
from byref.transcript_lines import TranscriptClosedError

_SEQ_HEAD = b'{"seq":'
"""How every transcript line begins (`Message.to_json` puts the seq first)."""
READ_BLOCK = 32
"""Lines read from the state at once (a replay reads in order)."""
BLOCK_BYTES = 1 << 20
"""A block bigger than this is not kept: memory holds at most one MiB of read-ahead."""


class ConversationLines:
    """A transcript's lines over a ConversationState: appends wait in memory until `flush` writes
    them as one batch."""

    def __init__(self, state: ConversationState, conversation: Conversation) -> None:
        self.state = state
        self.scope = conversation.scope
        self.origin = conversation.origin
        self._flushed = conversation.length
        self._pending: list[bytes] = []
        self._block: tuple[int, list[bytes]] = (0, [])
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._closed = False

    def __len__(self) -> int:
        return self._flushed + len(self._pending)

    @property
    def pending(self) -> int:
        """Lines appended but not yet written to the state."""
        return len(self._pending)

    def append(self, line: bytes) -> None:
        """Hold a line until the next flush; raises TranscriptClosedError once closed."""
        with self._lock:
            if self._closed:
                raise TranscriptClosedError("This conversation is closed; nothing more can be "
                                            "appended.")
            self._pending.append(line)

    def line(self, index: int) -> bytes:
        """The line at `index` (from the record's origin), from memory or the state; raises
        TranscriptClosedError once closed, TranscriptLookupError when the record no longer has
        it."""
        with self._lock:
            if self._closed:
                raise TranscriptClosedError("This conversation is closed; its messages were "
                                            "released.")
            if index >= self._flushed:
                return self._pending[index - self._flushed]
            start, block = self._block
            if start <= index < start + len(block):
                return block[index - start]
        got = self.state.lines(self.scope, self.origin + index, READ_BLOCK)
        if not got:
            raise TranscriptLookupError(
                f"message {self.origin + index} is no longer kept: this conversation expired "
                "or was deleted. Call the tool that produced it again to get a fresh reference.")
        if sum(map(len, got)) <= BLOCK_BYTES:
            with self._lock:
                self._block = (index, got)
        return got[0]

    def flush(self, *, working_set: Sequence[str] | None = None,
              usage: Sequence[tuple[str, str]] = ()) -> int:
        """Write the waiting lines (and `working_set`, `usage`) as one batch; how many lines.
        On failure nothing is written and the lines keep waiting (still readable)."""
        with self._flushing:
            with self._lock:
                batch = list(self._pending)
                first = self.origin + self._flushed
            if not batch and working_set is None and not usage:
                return 0
            if batch:
                self.state.append(self.scope, first, batch, working_set=working_set,
                                  usage=usage)
            else:  # nothing to continue: saved at whatever length the record has now
                self.state.save(self.scope, working_set=working_set, usage=usage)
            with self._lock:
                del self._pending[:len(batch)]
                self._flushed += len(batch)
            return len(batch)

    def numbered(self, head: bytes, tail: bytes) -> tuple[int, bytes]:
        """Write one line at the record's next seq, numbered by the state (`head + seq + tail`),
        and learn that the record is at least that long; (its seq, the line). Only with nothing
        waiting, since waiting lines were numbered after what was known."""
        with self._flushing:
            with self._lock:
                if self._pending:
                    raise MisuseError("numbered() with lines still waiting to be flushed")
            seq = self.state.append_numbered(self.scope, head, tail)
            with self._lock:
                self._flushed = max(self._flushed, seq - self.origin + 1)
            return seq, head + str(seq).encode() + tail

    def refresh(self) -> None:
        """Learn how far the record has grown (other writers' lines become readable); only
        with nothing waiting, since waiting lines were numbered after what was known."""
        conversation = self.state.find(self.scope)
        if conversation is None or conversation.origin != self.origin:
            raise SeqConflict(f"Conversation {str(self.scope)!r} is no longer the record this "
                              "transcript began (it expired or was deleted); open it again.")
        with self._lock:
            if self._pending:
                raise MisuseError("refresh() with lines still waiting to be flushed")
            self._flushed = max(self._flushed, conversation.length)

    def discard(self) -> None:
        """Forget the waiting lines (a shared append lost the race and will be renumbered)."""
        with self._lock:
            self._pending.clear()

    def close(self) -> None:
        """Release what memory holds; later appends and reads raise TranscriptClosedError."""
        with self._lock:
            self._closed = True
            self._block = (0, [])


class ConversationTranscript(Transcript):
    """A transcript over a conversation's lines; a seq from a record that expired is refused
    saying so.

    `shared=True`: other processes append to the same record (replicas). Each append is then
    written at once and numbered by the state itself (`append_numbered`: the record's next seq,
    in one step), so concurrent writers never race for a seq and never retry; the message
    returned carries the seq it landed at. A lookup past the end learns the length first, so
    another writer's messages answer here too. Each append is then one synchronous round trip:
    the price of sharing. `append_at` (a result that must follow its call) stays conditional.
    """

    def __init__(self, state: ConversationState, conversation: Conversation, *,
                 cache: int = DEFAULT_CACHE, shared: bool = False) -> None:
        self.conversation = conversation
        self.lines = ConversationLines(state, conversation)
        self.shared = shared
        self._sharing = threading.Lock()
        super().__init__(origin=conversation.origin, cache=cache, lines=self.lines)


    @property
    def appends_wait(self) -> bool:
        """Shared, each append is a round trip to the state (it numbers the line)."""
        return self.shared

    def append(self, role: Role, parts: list[Part] | tuple[Part, ...]) -> Message:
        """Append a message; shared, the state numbers it (the record's next seq, whatever
        other writers appended) and it is written at once: one round trip, never retried."""
        if not self.shared:
            return super().append(role, parts)
        if not parts:
            raise InvalidValue("a message needs at least one part")
        # Encoded with seq 0, then split around that number: the state writes in the real one.
        # Encoding first means a value that cannot be recorded raises before anything is written.
        line = self._encoder.encode(Message(0, role, tuple(parts)).to_json()) + b"\n"
        if not line.startswith(_SEQ_HEAD + b"0,"):
            raise RuntimeError(f"a transcript line does not begin with its seq: {line[:40]!r}")
        with self._sharing:
            _seq, written = self.lines.numbered(_SEQ_HEAD, line[len(_SEQ_HEAD) + 1:])
        raw = msgspec.json.decode(written)
        message = Message(raw["seq"], raw["role"], tuple(Part.from_json(p) for p in raw["parts"]))
        with self._lock:
            return self._remember(message)

    def append_at(self, seq: int, role: Role, parts: list[Part] | tuple[Part, ...]
                  ) -> Message | None:
        """Append only if the message lands at `seq` (a result whose refs were rendered with
        it); None, with nothing written, when the record has moved past it."""
        with self._sharing:
            if self.shared:
                self.lines.refresh()
            if self.origin + len(self.lines) != seq:
                return None
            message = super().append(role, parts)
            if not self.shared:
                return message
            try:
                self.lines.flush()
            except SeqConflict:
                self.lines.discard()
                with self._lock:
                    self._cache.pop(message.seq, None)
                return None
            return message

    def message(self, seq: int) -> Message:
        """The message at `seq`; raises TranscriptLookupError when it belonged to a record that
        expired (shared: the record's length is learnt first)."""
        expired = self.conversation.expired
        if expired is not None and expired[0] <= seq <= expired[1]:
            raise TranscriptLookupError(
                f"message {seq} belonged to this conversation's earlier record, which expired "
                "(it sat idle past its retention) and was deleted. Call the tool that produced "
                "it again to get a fresh reference.")
        if self.shared and seq >= self.origin + len(self.lines) and not self.lines.pending:
            self.lines.refresh()  # another writer may have appended it
        return super().message(seq)
