"""The sandboxed side of code mode: the `tools` object a program calls, run as its bootstrap.

Run by itself inside the sandbox (`python -I -c <this file's text>`), importing only the standard
library and msgspec, never byref. It speaks `code_mode.channel`'s frames over the descriptor in
BYREF_CHANNEL_FD with plain reads and writes (no socket object: the network audit hook stays),
gives the program `tools` (`tools.<name>(**args)`, `tools.gather`, `tools.search`,
`help(tools.<name>)`, `tools.inputs`), runs main.py, and sends the value of its last
expression, if it is one, as the run's return value. A result too large to send arrives as a
`Handle`: its ref, kind, size, shape and preview, data streamed in chunks on demand, passed to the
next call as a handle (the host resolves it; no bytes cross the channel for that); so does every
ref a result carries (`read_json`'s and `query_json`'s `value`, a ref inside a structured result).
"""

import ast
import contextlib
import inspect
import io
import keyword
import os
import struct
import sys
import threading
from collections.abc import Iterator
from typing import Any

import msgspec

_HEADER = struct.Struct(">I")
_CHUNK = 1 << 20


class ToolError(Exception):
    """A tool call that did not run or failed: `text` is the host's words, `reason` its code."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(text)
        self.text = text
        self.reason = reason


class ChannelClosed(ToolError):
    """The host stopped serving this program's tool calls."""


class Handle:
    """A result kept by the host: `ref` (pass `handle.value` or the handle itself to a tool),
    `kind`, `bytes`, `shape`, `preview`; read it with `chunks()`, `open()`, `lines()`,
    `read()` or `json()` (the last two hold it whole)."""

    __slots__ = ("_channel", "bytes", "id", "kind", "media_type", "preview", "ref", "shape")

    def __init__(self, info: dict[str, Any], channel: "_Channel") -> None:
        self.id = info["id"]
        self.ref = info.get("ref")
        self.kind = info.get("kind")
        self.bytes = info.get("bytes")
        self.media_type = info.get("mediaType")
        self.shape = info.get("shape")
        self.preview = info.get("preview")
        self._channel = channel

    @property
    def value(self) -> "Handle":
        """The handle as an argument (the same as passing the handle itself)."""
        return self

    def chunks(self, size: int = 1 << 16) -> Iterator[bytes]:
        """The data, `size` bytes at a time, read from the host as they are needed."""
        offset = 0
        size = max(1, min(int(size), _CHUNK))
        while True:
            data: bytes = self._channel.request("read", handle=self.id, offset=offset, size=size)
            if not data:
                return
            offset += len(data)
            yield data

    def open(self) -> io.BufferedReader:
        """A binary file object over the data (wrap in io.TextIOWrapper for text)."""
        return io.BufferedReader(_Stream(self.chunks()), buffer_size=1 << 16)

    def lines(self, encoding: str = "utf-8") -> io.TextIOWrapper:
        """The data's lines as text, streamed."""
        return io.TextIOWrapper(self.open(), encoding=encoding)

    def read(self) -> bytes:
        """All of the data (held whole in this program's memory)."""
        return b"".join(self.chunks(_CHUNK))

    def text(self, encoding: str = "utf-8") -> str:
        """All of the data as text."""
        return self.read().decode(encoding)

    def json(self) -> Any:
        """All of the data parsed as JSON."""
        return msgspec.json.decode(self.read())

    def __repr__(self) -> str:
        size = f"{self.bytes:,} bytes" if isinstance(self.bytes, int) else "size unknown"
        shape = f", {self.shape}" if self.shape else ""
        return f"<handle {self.ref or self.id}: {self.kind or 'data'}, {size}{shape}>"


class _Stream(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            self._left = next(self._chunks, b"")
            if not self._left:
                return 0
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n


class _Channel:
    """Requests and answers over the descriptor; one exchange at a time (threads take turns)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.next_id = 0
        self.closed: str | None = None
        self.encoder = msgspec.msgpack.Encoder(enc_hook=self._hook)
        self.decoder = msgspec.msgpack.Decoder()

    @staticmethod
    def _hook(value: Any) -> Any:
        if isinstance(value, Handle):
            return {"$handle": value.id}
        if isinstance(value, (tuple, set, frozenset)):
            return list(value)
        raise TypeError(f"a {type(value).__name__} cannot be sent to a tool; pass JSON values "
                        "or handles")

    def request(self, op: str, **fields: Any) -> Any:
        return self.exchange([(op, fields)])[0]

    def exchange(self, requests: list[tuple[str, dict[str, Any]]],
                 return_exceptions: bool = False) -> list[Any]:
        """Send every request, then collect their answers (in the order asked)."""
        with self.lock:
            if self.closed is not None:
                raise ChannelClosed(self.closed, "channel-protocol")
            ids: list[int] = []
            frames: list[bytes] = []
            for op, fields in requests:
                self.next_id += 1
                ids.append(self.next_id)
                body = self.encoder.encode({"op": op, "id": self.next_id, **fields})
                frames.append(_HEADER.pack(len(body)) + body)
            try:
                _write_all(self.fd, b"".join(frames))
                answers: dict[int, dict[str, Any]] = {}
                while len(answers) < len(ids):
                    answer = self._read()
                    answers[answer["id"]] = answer
            except (OSError, EOFError) as exc:
                self.closed = f"the host closed the tool channel ({exc})"
                raise ChannelClosed(self.closed, "channel-protocol") from None
        out: list[Any] = []
        for i in ids:
            answer = answers[i]
            if answer.get("error") is not None:
                error = ToolError(answer["error"], answer.get("reason") or "refused")
                if not return_exceptions:
                    raise error
                out.append(error)
            else:
                out.append(_handles(answer.get("value"), self))
        return out

    def _read(self) -> dict[str, Any]:
        header = _exactly(self.fd, _HEADER.size)
        (length,) = _HEADER.unpack(header)
        answer: dict[str, Any] = self.decoder.decode(_exactly(self.fd, length))
        return answer


def _exactly(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("end of channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _handles(value: Any, channel: _Channel) -> Any:
    """Handle markers in an answer as `Handle` objects."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$handle"), dict):
            return Handle(value["$handle"], channel)
        return {k: _handles(v, channel) for k, v in value.items()}
    if isinstance(value, list):
        return [_handles(v, channel) for v in value]
    return value


class _Tools:
    """`tools.<name>(**args)` calls a tool; `tools.gather([...])` runs several at once;
    `tools.search("...")` finds tools; `help(tools.<name>)` shows a tool's signature;
    `tools.inputs` holds the run's inputs (values, or handles for refs)."""

    ToolError = ToolError
    ChannelClosed = ChannelClosed
    Handle = Handle

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        opening = channel.request("describe", tool="")
        self._names = list(opening.get("tools", []))
        self.inputs = opening.get("inputs", {})
        self._made: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        made = self._made.get(name)
        if made is None:
            try:
                info = self._channel.request("describe", tool=name)
            except ChannelClosed:
                raise  # not a missing tool: the host stopped answering (a ToolError)
            except ToolError as exc:
                if exc.reason != "still-starting":
                    raise AttributeError(exc.text) from None
                # Its server is still starting: a call says so as `tools.call` would (a
                # ToolError), or runs the tool once the server is up; described again later.
                return _function(name, {"description": exc.text}, self._channel)
            made = self._made[name] = _function(name, info, self._channel)
        return made

    def __dir__(self) -> list[str]:
        return sorted(set(self._names) | {"gather", "search", "describe", "inputs", "call"})

    def call(self, name: str, args: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call tool `name` with `args` (a dict) or keyword arguments."""
        return self._channel.request("call", tool=name, args={**(args or {}), **kwargs})

    def gather(self, calls: list[tuple[str, dict[str, Any]]],
               return_exceptions: bool = False) -> list[Any]:
        """Run several calls at once: `calls` is a list of (name, args dict) pairs; the results
        come back in the same order (a ToolError in its place with return_exceptions=True)."""
        requests = [("call", {"tool": name, "args": dict(args or {})}) for name, args in calls]
        return self._channel.exchange(requests, return_exceptions=return_exceptions)

    def search(self, query: str, limit: int = 5) -> Any:
        """Tools matching `query`: a list of {name, description}."""
        return self._channel.request("search", query=str(query), limit=int(limit))

    def describe(self, name: str) -> Any:
        """A tool's signature, description and input schema."""
        return self._channel.request("describe", tool=name)


def _function(name: str, info: dict[str, Any], channel: _Channel) -> Any:
    def call(**kwargs: Any) -> Any:
        return channel.request("call", tool=name, args=kwargs)

    def map_(many: list[dict[str, Any]], return_exceptions: bool = False) -> list[Any]:
        return channel.exchange([("call", {"tool": name, "args": dict(a)}) for a in many],
                                return_exceptions=return_exceptions)

    call.__name__ = call.__qualname__ = name
    schema = info.get("input_schema") or {}
    required = set(schema.get("required", ()))
    params = [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY,
                                default=inspect.Parameter.empty if p in required else None)
              for p in schema.get("properties", {})
              # A keyword (`class`) cannot be a parameter: it stays callable as **{"class": …}.
              if p.isidentifier() and not keyword.iskeyword(p)]
    with contextlib.suppress(ValueError):
        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call.__doc__ = f"{info.get('signature', name + '(**args)')}\n\n{info.get('description', '')}"
    call.map = map_  # type: ignore[attr-defined]
    call.schema = info.get("input_schema")  # type: ignore[attr-defined]
    return call


def _run(path: str, namespace: dict[str, Any], channel: _Channel) -> None:
    with open(path, encoding="utf-8") as fh:
        source = fh.read()
    tree = ast.parse(source, path)
    last = None
    tail = tree.body[-1] if tree.body else None
    if isinstance(tail, ast.Expr):
        tree.body.pop()
        last = ast.Expression(tail.value)
    exec(compile(tree, path, "exec"), namespace)
    value = eval(compile(last, path, "eval"), namespace) if last is not None else None
    if channel.closed is not None:  # nothing can be returned; what was printed still is
        if value is not None:
            print(f"run_code: the return value was dropped: {channel.closed}", file=sys.stderr)
        return
    if value is None:  # nothing to return (a print() last, say): no round trip for it
        return
    try:
        channel.request("done", value=value)
    except TypeError as exc:
        raise TypeError(f"the program's last expression cannot be returned: {exc}") from None


def _no_network(event: str, args: Any) -> None:
    if event.startswith("socket.") and event != "socket.gethostname":
        raise PermissionError("network access is disabled in run_code; call tools instead")


def main() -> None:
    """Refuse sockets, connect `tools` to the channel, run main.py."""
    sys.addaudithook(_no_network)
    channel = _Channel(int(os.environ.pop("BYREF_CHANNEL_FD")))
    tools = _Tools(channel)
    namespace = {"__name__": "__main__", "__file__": "main.py", "tools": tools}
    sys.argv = ["main.py"]
    _run("main.py", namespace, channel)


if __name__ == "__main__":
    main()
