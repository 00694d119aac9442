"""The transcript: the append-only record of a run, addressable as `seq` → `part` → `field`.

The law: a message, once appended, never changes; a part records the full-fidelity value (what the
tool really returned, not the text the model was shown) plus the server recipes derived from it,
so "anything a tool ever returned is a coordinate, not a copy". Lookups that miss say what does
exist. Persisted as JSON lines, one message per line; a torn last line (a crash mid-write) is
discarded on load, so a restart sees every whole message and nothing half-written.

What a message costs to keep: its encoded line is the record (in a list in memory, a nameless
spill file, or the persisted file; `byref.transcript_lines`), plus a bounded cache of decoded
messages, so a long record held by a spill file costs its 8-byte-a-line index, not its objects.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from byref.errors import InvalidValue, OperatorError, RefusalReason
from byref.refs import Ref, RefRefusal, parse_server_ref, quote
from byref.transcript_lines import FileLines, Lines, MemoryLines
from byref.transcript_lines import TranscriptClosedError as TranscriptClosedError

Role = Literal["user", "assistant", "tool"]
PartType = Literal["text", "tool_call", "tool_result"]
DEFAULT_CACHE = 128
"""Decoded messages a transcript keeps by default (the most recently appended or read)."""


class TranscriptLookupError(RefRefusal):
    """A Message ref points at something the transcript does not hold (model-facing text)."""


class TranscriptCorruptError(OperatorError, ValueError):
    """A persisted transcript was changed outside byref (developer-facing; nothing is loaded)."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a recorded message: text, a tool call or a tool result, as recorded and as
    rendered."""
    type: PartType
    value: Any
    """Full-fidelity recorded value: text, the call's `{name, id, input}`, or the tool's result."""
    rendered: str | None = None
    """Exactly what the model was shown for this part, when that differs from `value`."""
    tool: str | None = None
    call_id: str | None = None
    is_error: bool = False
    derived: Mapping[str, Ref] = field(default_factory=dict)
    """Server recipes keyed by the dot-path field they stand for (e.g. "value")."""
    reason: RefusalReason | None = field(default=None, compare=False)
    """Why an error part is one (dispatch's refusal reason), for a caller in this process (code
    mode's `tools.ToolError`); not recorded: a part read back has None."""

    def to_json(self) -> dict[str, Any]:
        """The part as one transcript line holds it (unset fields left out)."""
        out: dict[str, Any] = {"type": self.type, "value": self.value}
        # Spelled out (not a loop of getattr): every part is encoded twice a call, in this order.
        if self.rendered is not None:
            out["rendered"] = self.rendered
        if self.tool is not None:
            out["tool"] = self.tool
        if self.call_id is not None:
            out["call_id"] = self.call_id
        if self.is_error:
            out["is_error"] = True
        if self.derived:
            out["derived"] = {k: r.to_json() for k, r in self.derived.items()}
        return out

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Part:
        """A part read back from its recorded form."""
        # Positional, and no comprehension for the usual part without recipes: every append
        # reads its line back through here (~2 us a part before).
        get = raw.get
        derived = get("derived")
        return Part(raw["type"], get("value"), get("rendered"), get("tool"), get("call_id"),
                    bool(get("is_error", False)),
                    {k: parse_server_ref(v) for k, v in derived.items()} if derived else {})


@dataclass(frozen=True, slots=True)
class Message:
    """A recorded message: its position (`seq`), who spoke, and its parts."""
    seq: int
    role: Role
    parts: tuple[Part, ...]

    def to_json(self) -> dict[str, Any]:
        """The message as one transcript line."""
        return {"seq": self.seq, "role": self.role, "parts": [p.to_json() for p in self.parts]}


class Transcript:
    """Append-only messages, kept as their JSON lines; decoded on demand, recent ones cached.

    Where the lines live: `Transcript()` keeps them in a list in memory (a few hundred bytes a
    message, no file — right for a library run); `Transcript(spill=True)`, or `spill=DIR`, in a
    nameless temporary file (the gateway's default: a long session costs 8 bytes a message of
    memory, the index); `Transcript(path)` in the file at `path`, durable (fsynced per append).
    The record is the encoded line: `append` returns, and every lookup answers, that line
    decoded, so a caller changing its own objects later changes nothing recorded, and all three
    answer alike. The last `cache` messages used are kept decoded, so the messages just
    appended and the ones just read cost a dictionary lookup.

    `Transcript(lines=…, origin=…)` adopts lines kept elsewhere (a conversation-state store).

    `origin` is the seq of the first message. A record that outlives its process (the gateway's,
    kept in memory) starts from a clock-derived origin (`fresh_origin()`), so a ref minted before
    a restart names a seq this transcript never held and is refused, never answered with a newer
    record's value. A persisted transcript is reopened with the origin it was created with.
    """

    def __init__(self, path: str | Path | None = None, *, origin: int = 0,
                 spill: bool | str | Path = False, cache: int = DEFAULT_CACHE,
                 lines: Lines | None = None) -> None:
        if isinstance(origin, bool) or not isinstance(origin, int) or origin < 0:
            raise InvalidValue(f"Transcript origin must be a non-negative integer, got {origin!r}")
        if isinstance(cache, bool) or not isinstance(cache, int) or cache < 0:
            raise InvalidValue(f"Transcript cache must be a non-negative integer, got {cache!r}")
        if path is not None and spill is not False:
            raise InvalidValue(f"A persisted transcript ({str(path)!r}) is its own file; spill "
                             f"applies only to one kept without a path, got spill={spill!r}")
        self.path = Path(path) if path is not None else None
        self.origin = origin
        self._cache_size = cache
        self._cache: OrderedDict[int, Message] = OrderedDict()
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        self._lines: Lines
        if lines is not None:  # kept elsewhere (byref.conversations): adopted as they are
            if path is not None or spill is not False:
                raise InvalidValue("A transcript over given lines takes no path or spill.")
            self._lines = lines
        elif self.path is not None:
            self._lines = self._load(self.path)
        elif spill is not False:
            self._lines = FileLines.anonymous(None if spill is True else spill)
        else:
            self._lines = MemoryLines()

    # -- writing -------------------------------------------------------------------------------
    def append(self, role: Role, parts: list[Part] | tuple[Part, ...]) -> Message:
        """Record a message of `role` with `parts` and return it; raises `ValueError` for no
        parts or a value that cannot be recorded, leaving the transcript unchanged."""
        if not parts:
            raise InvalidValue("a message needs at least one part")
        with self._lock:
            return self._append(role, parts)

    def append_at(self, seq: int, role: Role, parts: list[Part] | tuple[Part, ...]
                  ) -> Message | None:
        """Append only if the message lands at `seq` (a result whose refs were rendered with
        the seq before it); None, with nothing written, when another message came first."""
        if not parts:
            raise InvalidValue("a message needs at least one part")
        with self._lock:
            if self.origin + len(self._lines) != seq:
                return None
            return self._append(role, parts)

    def _append(self, role: Role, parts: list[Part] | tuple[Part, ...]) -> Message:
        seq = self.origin + len(self._lines)
        # Encode (and read back) before touching the lines, so a value that cannot be
        # recorded raises here and leaves the transcript exactly as it was.
        line = self._encoder.encode(Message(seq, role, tuple(parts)).to_json()) + b"\n"
        message = _decode(line)
        self._lines.append(line)
        self._remember(message)
        return message

    def close(self) -> None:
        """Release the lines (a spill file is deleted); later lookups and appends raise."""
        with self._lock:
            self._cache.clear()
            self._lines.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def appends_wait(self) -> bool:
        """Each append waits on storage other processes share (a replicated record), so code on
        an event loop should append off the loop. False here: appends go to memory or a file."""
        return False

    @property
    def storage(self) -> Literal["memory", "spill", "file", "state"]:
        """Where the lines live: a list in memory, a nameless spill file, the file at `path`, or
        a conversation-state store (`lines=`)."""
        if self.path is not None:
            return "file"
        if not isinstance(self._lines, MemoryLines | FileLines):
            return "state"
        return "memory" if isinstance(self._lines, MemoryLines) else "spill"

    # -- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[Message]:
        # The messages there are now, read lazily; a walk through all of them does not push the
        # recent ones out of the cache.
        count = len(self._lines)
        return (self._at(index, keep=False) for index in range(count))

    @property
    def last_seq(self) -> int | None:
        """The seq of the newest message, or None when nothing is recorded."""
        count = len(self._lines)
        return self.origin + count - 1 if count else None

    @property
    def next_seq(self) -> int:
        """The seq the next message appended here lands at, as far as this process knows (a
        record other processes share may have moved on: `append_at` says so)."""
        return self.origin + len(self._lines)

    def message(self, seq: int) -> Message:
        """The message at `seq`; raises `TranscriptLookupError` saying which messages exist."""
        index = seq - self.origin
        count = len(self._lines)
        if 0 <= index < count:
            return self._at(index, keep=True)
        if seq < self.origin:
            raise TranscriptLookupError(
                f"message {seq} is not in this conversation's record, which begins at message "
                f"{self.origin} (the reference is from an earlier session or before a restart). "
                "Call the tool that produced it again to get a fresh reference."
            )
        if not count:
            raise TranscriptLookupError(f"message {seq} does not exist: the transcript is empty.")
        raise TranscriptLookupError(
            f"message {seq} does not exist; messages are {self.origin}–{self.origin + count - 1}."
        )

    def part(self, seq: int, part: int) -> Part:
        """Part `part` of message `seq`; raises `TranscriptLookupError` naming the parts it has."""
        message = self.message(seq)
        if 0 <= part < len(message.parts):
            return message.parts[part]
        last = len(message.parts) - 1
        where = "part 0" if last == 0 else f"parts 0–{last}"
        raise TranscriptLookupError(f"message {seq} has {where}; there is no part {part}.")

    def field(self, seq: int, part: int, path: str | None) -> Any:
        """The recorded value at `path` (dot-path; numeric segments index arrays)."""
        return walk(self.part(seq, part).value, path, where=f"message {seq} part {part}")

    def _at(self, index: int, *, keep: bool) -> Message:
        seq = self.origin + index
        with self._lock:
            hit = self._cache.get(seq)
            if hit is not None:
                self._cache.move_to_end(seq)
                return hit
            line = self._lines.line(index)
        message = _decode(line)  # outside the lock: appends need not wait for a decode
        if not keep:
            return message
        with self._lock:
            return self._remember(message)

    def _remember(self, message: Message) -> Message:
        if not self._cache_size:
            return message
        kept = self._cache.setdefault(message.seq, message)
        self._cache.move_to_end(message.seq)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return kept

    # -- persistence ---------------------------------------------------------------------------
    def _load(self, path: Path) -> FileLines:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            return FileLines.persisted(path)
        lines = FileLines.persisted(path)
        try:
            good = 0
            with path.open("rb") as fh:
                for number, line in enumerate(fh, 1):
                    if not line.endswith(b"\n"):
                        break  # torn write: the message was never acknowledged
                    try:
                        message = _decode(line)
                    except (msgspec.DecodeError, KeyError, TypeError, RefRefusal) as exc:
                        raise TranscriptCorruptError(
                            f"Transcript {str(path)!r} line {number} is not a recorded message "
                            f"({exc}); it was changed outside byref. Restore it from a copy, or "
                            "move it aside to start a new transcript."
                        ) from exc
                    if message.seq != self.origin + len(lines):
                        raise TranscriptCorruptError(
                            f"Transcript {str(path)!r} line {number} holds message {message.seq}, "
                            f"expected {self.origin + len(lines)}; lines were removed or "
                            "reordered."
                        )
                    lines.adopt(len(line))
                    self._remember(message)  # the newest `cache` messages stay decoded
                    good += len(line)
                size = fh.seek(0, os.SEEK_END)
            if good != size:
                lines.truncate(good)
        except BaseException:  # a refused file is not held open
            lines.close()
            raise
        return lines


def _decode(line: bytes) -> Message:
    raw = msgspec.json.decode(line)
    parts = tuple([Part.from_json(p) for p in raw["parts"]])
    return Message(raw["seq"], raw["role"], parts)


_ORIGIN_EPOCH_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z: origins count milliseconds from here, keeping seqs to ~11 digits."""


def fresh_origin(clock: Callable[[], int] = time.time_ns) -> int:
    """A first seq no earlier process can have reached: milliseconds since 2026 (wall clock).

    A previous record that began at origin o and held n messages ended at o + n - 1; it would
    have had to append faster than one message a millisecond for its last seq to reach a later
    origin. A clock set backwards is the one way to overlap; durable state removes the need.
    """
    return max(0, clock() // 1_000_000 - _ORIGIN_EPOCH_MS)


def walk(value: Any, path: str | None, *, where: str) -> Any:
    """Follow a dot-path into a JSON-like value; a miss names what exists at the failing step.

    Only ASCII digits index arrays: `rows.3` is `rows[3]`, while `rows.٣`, `rows.３` or `rows.²`
    name nothing (Python's `isdigit` would accept them and `int` read or reject them unevenly).
    """
    if not path:
        return value
    current = value
    walked: list[str] = []
    for segment in path.split("."):
        at = f" at {quote('.'.join(walked))}" if walked else ""
        if isinstance(current, dict):
            if segment not in current:
                keys = ", ".join(quote(k, 40) for k in list(current)[:20]) or "none"
                raise TranscriptLookupError(
                    f"{where} has no field {quote(segment)}{at}; fields there: {keys}."
                )
            current = current[segment]
        elif isinstance(current, list) and segment.isascii() and segment.isdigit():
            # A digit run too long for int() (4,300 digits) is out of range all the same.
            index = int(segment) if len(segment) <= 18 else len(current)
            if index >= len(current):
                raise TranscriptLookupError(
                    f"{where}: index {segment[:20]}{'…' if len(segment) > 20 else ''} is out of "
                    "range at "
                    f"{quote('.'.join(walked)) if walked else 'the top'} (the array has "
                    f"{len(current)} items)."
                )
            current = current[index]
        else:
            kind = type(current).__name__ if not isinstance(current, list) else "array"
            hint = " (arrays are indexed by ASCII digits, e.g. 'rows.3')" if kind == "array" else ""
            raise TranscriptLookupError(
                f"{where}: cannot take field {quote(segment)} of a {kind}{at}{hint}."
            )
        walked.append(segment)
    return current
