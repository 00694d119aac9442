"""The stdio gateway's first answers, given before the MCP SDK is imported (standard library only).

Why: importing the SDK, pydantic and the gateway costs a stdio gateway ~2 s of CPU before its
first answer, and clients give up on a connect after 5 s (Gemini CLI) or 15 s (the Inspector) on
a busy machine. While those imports run on a thread, this module reads the client's first lines
and answers `initialize` (and `ping` after it) or `server/discover` from `front.json`: answers
the full gateway gave, recorded by `edge/front_answers.py` (one source; a test re-records them and
compares), for this SDK and byref version only (else nothing is answered here). The
config's values in them (the conversation, `autoInsertBytes`, whether callers may see different
lists) replace the recording's stand-ins.

The law: a line is answered here only when the full gateway would answer it so — a well-formed
request of one of those methods, in the shape and protocol version recorded, every line before it
answered here too or a `notifications/initialized`; the first line that is anything else (bad
JSON, a byte order mark, nesting past a parser's depth, another method) ends the front, and it
and every line after it wait for the full gateway. At the handover every byte read is replayed
to the full gateway (`Replay`), which serves the session from its first line; its answers to the
requests answered here are not sent again, and the lines after them wait until they are given.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import select
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ANSWERS = Path(__file__).with_name("front.json")
"""The recorded answers (`edge/front_answers.py` writes it)."""
CONVERSATION = "stdio-front-conversation"
"""The recording's stand-in for the conversation id."""
INLINE_BYTES = 918273645
"""The recording's stand-in for `autoInsertBytes`."""
INITIALIZED = "notifications/initialized"
_REQUEST_KEYS = {"jsonrpc", "id", "method", "params"}
_CLIENT_INFO = {"name", "version", "title", "description", "websiteUrl"}
_ENVELOPE = "io.modelcontextprotocol/"
_MODERN_META = {f"{_ENVELOPE}protocolVersion", f"{_ENVELOPE}clientCapabilities",
                f"{_ENVELOPE}clientInfo"}
_ID_LIMIT = 1 << 53
_DIST = re.compile(r"^(mcp|mcp_types)-([^-]+)\.dist-info$")


def stdio_said(conversation: str) -> str:
    """What a stdio gateway says of its conversation (on stderr at start-up and in its
    `serverInfo.description`)."""
    return (f"stdio conversation {conversation!r}; resume it with --conversation {conversation} "
            "(Message refs address it; Blob refs outlive it)")


def installed() -> dict[str, str]:
    """The versions the recording is valid for: byref's, the MCP SDK's and its types'."""
    from byref import __version__

    found = {"byref": __version__}
    spec = importlib.util.find_spec("mcp")
    if spec is not None and spec.origin is not None:
        site = Path(spec.origin).parent.parent
        try:
            names = os.listdir(site)
        except OSError:
            names = []
        for name in names:
            m = _DIST.match(name)
            if m:
                found[m.group(1)] = m.group(2)
    return found


@dataclass(frozen=True)
class Facts:
    """What the config puts into the answers."""

    conversation: str
    inline_bytes: int
    private: bool
    """Whether some caller may see lists another does not (`byref.gateway.config.file.restricts`):
    lists are then cached per caller."""
    servers: int


@dataclass
class Replay:
    """What the front read, for the full gateway: `head` (through the last line answered here)
    is read first; `tail` once the full gateway has given its own answers to `answered` (each
    request's id and the answer sent here, which it does not send again)."""

    head: bytes = b""
    tail: bytes = b""
    answered: list[tuple[str | int, bytes]] = field(default_factory=list)


def load(path: Path = ANSWERS) -> dict[str, Any] | None:
    """The recorded answers, or None when there are none for the installed versions."""
    try:
        recorded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return recorded if recorded.get("versions") == installed() else None


class Front:
    """Which of the client's first lines are answered, and with what (`offer`)."""

    def __init__(self, recorded: Mapping[str, Any], facts: Facts) -> None:
        self._recorded = recorded
        self._facts = facts
        self.open = True
        """False from the first line not answered here: the full gateway serves the rest."""
        self._era: str | None = None
        self.answered: list[tuple[str | int, bytes]] = []
        """Each request answered here (its id, the answer line), in order."""

    def offer(self, line: bytes) -> bytes | None:
        """The answer line (with its newline) to `line` (without it), None when there is none
        to send; a line this front does not take closes it."""
        message = _request(line) if self.open else None
        if message is None:
            self.open = False
            return None
        answer = self._answer(message)
        if answer is None:
            if (message.get("method") != INITIALIZED or "id" in message
                    or self._era != "handshake"):
                self.open = False
            return None
        rid = message["id"]
        data = json.dumps({"jsonrpc": "2.0", "id": rid, "result": answer},
                          ensure_ascii=False, separators=(",", ":"))
        for stand_in, value in ((CONVERSATION, self._facts.conversation),
                                (str(INLINE_BYTES), str(self._facts.inline_bytes))):
            data = data.replace(stand_in, value)
        out = data.encode("utf-8") + b"\n"
        self.answered.append((rid, out))
        return out

    def _answer(self, message: dict[str, Any]) -> Any | None:
        method, params = message.get("method"), message.get("params")
        if "id" not in message:
            return None
        if method == "initialize" and self._era is None:
            result = self._recorded["initialize"].get(_handshake(params))
            if result is not None:
                self._era = "handshake"
            return result
        if method == "ping" and self._era == "handshake" and params in (None, {}):
            return self._recorded["ping"]
        if method == "server/discover" and self._era in (None, "modern") and self._facts.servers:
            version = _modern(params)
            scope = "private" if self._facts.private else "public"
            result = self._recorded["discover"][scope].get(version)
            if result is not None:
                self._era = "modern"
            return result
        return None


def _request(line: bytes) -> dict[str, Any] | None:
    """`line` as a JSON-RPC request or notification every parser reads alike, else None."""
    if b"\r" in line:
        return None  # universal newlines: leave the line's splitting to the full gateway
    try:
        message = json.loads(line.decode("utf-8"), parse_constant=_refuse)
        json.dumps(message, ensure_ascii=False).encode("utf-8")  # no lone surrogate
    except (ValueError, RecursionError, UnicodeError):
        return None
    if (not isinstance(message, dict) or message.get("jsonrpc") != "2.0"
            or not isinstance(message.get("method"), str) or not set(message) <= _REQUEST_KEYS):
        return None
    rid = message.get("id", "")
    if isinstance(rid, bool) or not isinstance(rid, (int, str)) or (
            isinstance(rid, int) and not -_ID_LIMIT < rid < _ID_LIMIT):
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    return message


def _refuse(constant: str) -> Any:
    raise ValueError(constant)


def _handshake(params: Any) -> str | None:
    """The protocol version an `initialize` asks for, when its params are plainly valid."""
    if not isinstance(params, dict) or not set(params) <= {"protocolVersion", "capabilities",
                                                           "clientInfo", "_meta"}:
        return None
    if params.get("_meta", {}) != {} or not _capabilities(params.get("capabilities")):
        return None
    info = params.get("clientInfo")
    if not isinstance(info, dict) or not set(info) <= _CLIENT_INFO or not all(
            isinstance(info.get(k), str) for k in ("name", "version")) or not all(
            isinstance(v, str) for v in info.values()):
        return None
    version = params.get("protocolVersion")
    return version if isinstance(version, str) else None


def _capabilities(caps: Any) -> bool:
    if not isinstance(caps, dict):
        return False
    for name, value in caps.items():
        if not isinstance(value, dict):
            return False
        if name in ("experimental", "extensions") and not all(
                isinstance(v, dict) for v in value.values()):
            return False
        if name == "roots" and not isinstance(value.get("listChanged", False), bool):
            return False
    return True


def _modern(params: Any) -> str | None:
    """The revision a `server/discover` names in its envelope, when its params are plainly
    valid."""
    if not isinstance(params, dict) or set(params) != {"_meta"}:
        return None
    meta = params["_meta"]
    if not isinstance(meta, dict) or not set(meta) <= _MODERN_META:
        return None
    info = meta.get(f"{_ENVELOPE}clientInfo", {"name": "", "version": ""})
    if not _capabilities(meta.get(f"{_ENVELOPE}clientCapabilities")) or not isinstance(
            info, dict) or not set(info) <= _CLIENT_INFO or not all(
            isinstance(info.get(k), str) for k in ("name", "version")):
        return None
    version = meta.get(f"{_ENVELOPE}protocolVersion")
    return version if isinstance(version, str) else None


def usable(stdin: int = 0, stdout: int = 1) -> bool:
    """Whether both descriptors are pipes, sockets or terminals (the full gateway then reads
    them on its event loop, where a replay can go first: `wire.stdio`)."""
    import stat

    for fd in (stdin, stdout):
        try:
            kind = os.fstat(fd).st_mode
        except OSError:
            return False
        if not (stat.S_ISFIFO(kind) or stat.S_ISSOCK(kind)
                or (stat.S_ISCHR(kind) and os.isatty(fd))):
            return False
    return os.name == "posix"


def serve(front: Front, ready: int, *, stdin: int = 0, stdout: int = 1) -> Replay:
    """Answer the lines `front` takes until `ready` (a descriptor) is readable; what was read.

    Stops reading at the first line the front does not take, and at end of input (the full
    gateway then reads the end too)."""
    buffer = bytearray()
    done = head = 0  # where the next line starts; the end of the last line answered here
    reading = True
    while True:
        waiting = [stdin, ready] if reading else [ready]
        readable, _, _ = select.select(waiting, [], [])
        if ready in readable:
            break
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            reading = False
            continue
        buffer += chunk
        while front.open and (end := buffer.find(b"\n", done)) >= 0:
            answer = front.offer(bytes(buffer[done:end]))
            done = end + 1
            if answer is not None:
                head = done
                if not _write(stdout, answer):
                    front.open = False
        reading = front.open
    return Replay(bytes(buffer[:head]), bytes(buffer[head:]), list(front.answered))


def _write(fd: int, data: bytes) -> bool:
    """Write all of `data`; False when the reader went away."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [])
        except OSError:
            return False
    return True
