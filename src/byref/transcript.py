"""The transcript: the append-only record of a run, addressable as `seq` → `part` → `field`.

The law: a message, once appended, never changes; a part records the full-fidelity value (what the
tool really returned, not the text the model was shown) plus the server recipes derived from it,
so "anything a tool ever returned is a coordinate, not a copy". Lookups that miss say what does
exist. Persisted as JSON lines, one message per line; a torn last line (a crash mid-write) is
discarded on load, so a restart sees every whole message and nothing half-written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from byref.refs import Ref, RefRefusal, parse_server_ref

Role = Literal["user", "assistant", "tool"]
PartType = Literal["text", "tool_call", "tool_result"]


class TranscriptLookupError(RefRefusal):
    """A Message ref points at something the transcript does not hold (model-facing text)."""


class TranscriptCorruptError(ValueError):
    """A persisted transcript was changed outside byref (developer-facing; nothing is loaded)."""


@dataclass(frozen=True, slots=True)
class Part:
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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "value": self.value}
        for key in ("rendered", "tool", "call_id"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.is_error:
            out["is_error"] = True
        if self.derived:
            out["derived"] = {k: r.to_json() for k, r in self.derived.items()}
        return out

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Part:
        return Part(
            type=raw["type"], value=raw.get("value"), rendered=raw.get("rendered"),
            tool=raw.get("tool"), call_id=raw.get("call_id"),
            is_error=bool(raw.get("is_error", False)),
            derived={k: parse_server_ref(v) for k, v in (raw.get("derived") or {}).items()},
        )


@dataclass(frozen=True, slots=True)
class Message:
    seq: int
    role: Role
    parts: tuple[Part, ...]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "role": self.role, "parts": [p.to_json() for p in self.parts]}


class Transcript:
    """Append-only messages. In memory by default; `Transcript(path)` persists as JSON lines."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._messages: list[Message] = []
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()
        if self.path is not None:
            self._load(self.path)

    # -- writing -------------------------------------------------------------------------------
    def append(self, role: Role, parts: list[Part] | tuple[Part, ...]) -> Message:
        if not parts:
            raise ValueError("a message needs at least one part")
        with self._lock:
            message = Message(len(self._messages), role, tuple(parts))
            # Encode before touching the file or the list, so a value msgspec cannot encode
            # raises here and leaves both exactly as they were.
            line = self._encoder.encode(message.to_json()) + b"\n"
            if self.path is not None:
                with self.path.open("ab") as fh:
                    fh.write(line)
                    fh.flush()
                    os.fsync(fh.fileno())
            self._messages.append(message)
            return message

    # -- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(list(self._messages))

    @property
    def last_seq(self) -> int | None:
        return len(self._messages) - 1 if self._messages else None

    def message(self, seq: int) -> Message:
        if 0 <= seq < len(self._messages):
            return self._messages[seq]
        if not self._messages:
            raise TranscriptLookupError(f"message {seq} does not exist: the transcript is empty.")
        raise TranscriptLookupError(
            f"message {seq} does not exist; messages are 0–{len(self._messages) - 1}."
        )

    def part(self, seq: int, part: int) -> Part:
        message = self.message(seq)
        if 0 <= part < len(message.parts):
            return message.parts[part]
        last = len(message.parts) - 1
        where = "part 0" if last == 0 else f"parts 0–{last}"
        raise TranscriptLookupError(f"message {seq} has {where}; there is no part {part}.")

    def field(self, seq: int, part: int, path: str | None) -> Any:
        """The recorded value at `path` (dot-path; numeric segments index arrays)."""
        return walk(self.part(seq, part).value, path, where=f"message {seq} part {part}")

    # -- persistence ---------------------------------------------------------------------------
    def _load(self, path: Path) -> None:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            return
        data = path.read_bytes()
        good = 0
        for number, line in enumerate(data.splitlines(keepends=True), 1):
            if not line.endswith(b"\n"):
                break  # torn write: the message was never acknowledged
            try:
                raw = msgspec.json.decode(line)
                parts = tuple(Part.from_json(p) for p in raw["parts"])
                message = Message(raw["seq"], raw["role"], parts)
            except (msgspec.DecodeError, KeyError, TypeError, RefRefusal) as exc:
                raise TranscriptCorruptError(
                    f"Transcript {str(path)!r} line {number} is not a recorded message ({exc}); "
                    "it was changed outside byref. Restore it from a copy, or move it aside to "
                    "start a new transcript."
                ) from exc
            if message.seq != len(self._messages):
                raise TranscriptCorruptError(
                    f"Transcript {str(path)!r} line {number} holds message {message.seq}, "
                    f"expected {len(self._messages)}; lines were removed or reordered."
                )
            self._messages.append(message)
            good += len(line)
        if good != len(data):
            with path.open("r+b") as fh:
                fh.truncate(good)


def walk(value: Any, path: str | None, *, where: str) -> Any:
    """Follow a dot-path into a JSON-like value; a miss names what exists at the failing step."""
    if not path:
        return value
    current = value
    walked: list[str] = []
    for segment in path.split("."):
        if isinstance(current, dict):
            if segment not in current:
                keys = ", ".join(repr(k) for k in list(current)[:20]) or "none"
                at = f" at {'.'.join(walked)!r}" if walked else ""
                raise TranscriptLookupError(
                    f"{where} has no field {segment!r}{at}; fields there: {keys}."
                )
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit():
            index = int(segment)
            if index >= len(current):
                raise TranscriptLookupError(
                    f"{where}: index {index} is out of range at {'.'.join(walked) or 'the top'!r}"
                    f" (the array has {len(current)} items)."
                )
            current = current[index]
        else:
            kind = type(current).__name__ if not isinstance(current, list) else "array"
            raise TranscriptLookupError(
                f"{where}: cannot take field {segment!r} of a {kind}"
                f"{' at ' + repr('.'.join(walked)) if walked else ''}."
            )
        walked.append(segment)
    return current
