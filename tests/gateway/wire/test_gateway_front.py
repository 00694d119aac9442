"""The stdio front (`wire.front`): which first lines it answers, with the recorded answers and the
config's values in them, which lines end it, and what it hands the full gateway."""

from __future__ import annotations

import json
import os
import select
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _waits import scaled
from byref.gateway.wire import front

RECORDED = front.load()
FACTS = front.Facts("stdio-0123456789abcdef", 4096, private=False, servers=1)
HANDSHAKE = sorted(RECORDED["initialize"]) if RECORDED else []
MODERN = sorted(RECORDED["discover"]["public"]) if RECORDED else []


def _line(message: Any) -> bytes:
    return json.dumps(message).encode()


def _initialize(version: str, rid: Any = 1, **params: Any) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "t", "version": "1"}, **params}})


def _discover(version: str, rid: Any = 1) -> bytes:
    return _line({"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {}}}})


def _front(facts: front.Facts = FACTS) -> front.Front:
    assert RECORDED is not None
    return front.Front(RECORDED, facts)


def test_a_recording_for_the_installed_versions_ships() -> None:
    assert RECORDED is not None, "re-record: python -m byref.gateway.edge.front_answers"
    assert RECORDED["versions"] == front.installed()
    assert HANDSHAKE and MODERN


def test_a_recording_for_other_versions_is_not_used(tmp_path: Path) -> None:
    assert RECORDED is not None
    other = tmp_path / "front.json"
    other.write_text(json.dumps({**RECORDED, "versions": {**RECORDED["versions"],
                                                          "mcp": "0.0.1"}}))
    assert front.load(other) is None
    assert front.load(tmp_path / "missing.json") is None


@pytest.mark.parametrize("rid", [1, "a-string-id", 2**40])
def test_initialize_is_answered_with_the_recording_and_the_configs_values(rid: Any) -> None:
    assert RECORDED is not None
    for version in HANDSHAKE:
        answer = _front().offer(_initialize(version, rid))
        assert answer is not None and answer.endswith(b"\n")
        got = json.loads(answer)
        assert got["id"] == rid
        assert got["result"] == _expected(json.loads(_initialize(version)))
        assert got["result"]["protocolVersion"] == version
        assert FACTS.conversation in got["result"]["serverInfo"]["description"]
        assert got["result"]["capabilities"]["experimental"]["dev.byref/refs"][
            "inlineBytes"] == 4096


def test_after_initialize_the_initialized_notification_is_read_and_pings_answered() -> None:
    f = _front()
    assert f.offer(_initialize(HANDSHAKE[-1])) is not None
    assert f.offer(_line({"jsonrpc": "2.0", "method": "notifications/initialized"})) is None
    assert f.open
    answer = f.offer(_line({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
    assert answer is not None and json.loads(answer) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert [rid for rid, _ in f.answered] == [1, 7]
    assert f.offer(_line({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})) is None
    assert not f.open  # the full gateway serves the rest


@pytest.mark.parametrize("private", [False, True])
def test_discover_is_answered_per_revision_with_lists_shared_or_per_caller(private: bool) -> None:
    assert RECORDED is not None
    facts = front.Facts(FACTS.conversation, 4096, private=private, servers=2)
    for version in MODERN:
        f = _front(facts)
        got = json.loads(f.offer(_discover(version)) or b"null")
        assert got["result"]["cacheScope"] == ("private" if private else "public")
        assert got["result"]["capabilities"]["extensions"]["dev.byref/refs"][
            "inlineBytes"] == 4096
        assert f.offer(_discover(version, 2)) is not None  # the same revision again
        assert f.offer(_initialize(HANDSHAKE[-1], 3)) is None  # another era: the SDK's answer


def test_a_gateway_without_servers_leaves_discover_to_the_full_gateway() -> None:
    # Its answer is then settled (nothing to wait for), unlike the recording's.
    f = _front(front.Facts(FACTS.conversation, 4096, private=False, servers=0))
    assert f.offer(_discover(MODERN[-1])) is None and not f.open


DEEP = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":' + b"[" * 5000 + b"]" * 5000 + b"}"
REFUSED = {
    "not json": b'{"jsonrpc":"2.0","id":1,',
    "byte order mark": b"\xef\xbb\xbf" + _initialize("2025-06-18"),
    "nested past any parser": DEEP,
    "not utf-8": b'{"jsonrpc":"2.0","id":1,"method":"initialize","x":"\xff"}',
    "a carriage return": _initialize("2025-06-18").replace(b",", b",\r", 1),
    "NaN": _initialize("2025-06-18", capabilities={"experimental": {"x": {"n": float("nan")}}}),
    "a lone surrogate": _initialize("2025-06-18").replace(b'"t"', b'"\\ud800"'),
    "a boolean id": _initialize("2025-06-18", True),
    "a fractional id": _initialize("2025-06-18", 1.5),
    "an id past 2**53": _initialize("2025-06-18", 2**60),
    "an unknown version": _initialize("1999-01-01"),
    "a modern version in initialize": _initialize("2026-07-28"),
    "capabilities not objects": _initialize("2025-06-18", capabilities={"roots": True}),
    "roots.listChanged not a boolean": _initialize(
        "2025-06-18", capabilities={"roots": {"listChanged": "yes"}}),
    "clientInfo without a version": _initialize("2025-06-18", clientInfo={"name": "t"}),
    "a _meta on initialize": _initialize("2025-06-18", _meta={"progressToken": 1}),
    "another key": _initialize("2025-06-18", other=1),
    "a request before initialize": _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    "ping before initialize": _line({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
    "a batch": b"[" + _initialize("2025-06-18") + b"]",
    "a response": _line({"jsonrpc": "2.0", "id": 1, "result": {}}),
    "jsonrpc 1.0": _line({"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {}}),
}


@pytest.mark.parametrize("why", sorted(REFUSED))
def test_a_line_the_front_does_not_take_ends_it(why: str) -> None:
    f = _front()
    assert f.offer(REFUSED[why]) is None
    assert not f.open
    assert f.offer(_initialize("2025-06-18")) is None  # nothing after it is answered here


@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_line_is_answered_only_as_recorded_and_never_raises(line: bytes) -> None:
    answer = _front().offer(line)
    if answer is not None:
        sent = json.loads(line)
        assert json.loads(answer) == {"jsonrpc": "2.0", "id": sent["id"],
                                      "result": _expected(sent)}


def _expected(sent: dict[str, Any]) -> Any:
    """The recorded answer to `sent`, with `FACTS` in it."""
    assert RECORDED is not None
    if sent["method"] == "initialize":
        recorded = RECORDED["initialize"][sent["params"]["protocolVersion"]]
    else:
        version = sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
        recorded = RECORDED["discover"]["public"][version]
    return json.loads(json.dumps(recorded).replace(front.CONVERSATION, FACTS.conversation)
                      .replace(str(front.INLINE_BYTES), str(FACTS.inline_bytes)))


KEYS = st.sampled_from(["protocolVersion", "capabilities", "clientInfo", "_meta", "roots",
                        "listChanged", "name", "version", "experimental",
                        "io.modelcontextprotocol/protocolVersion",
                        "io.modelcontextprotocol/clientCapabilities"]) | st.text(max_size=5)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["2025-06-18", "2026-07-28", "t"]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(KEYS, c, max_size=3), max_leaves=8)


@given(st.sampled_from(["initialize", "server/discover"]),
       st.dictionaries(KEYS, VALUES, max_size=4))
def test_params_of_any_shape_never_raise(method: str, params: dict[str, Any]) -> None:
    _front().offer(_line({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))


class _Pipes:
    """The front's stdin and stdout as pipes, and its `ready` descriptor."""

    def __init__(self) -> None:
        self.stdin_r, self.stdin_w = os.pipe()
        self.stdout_r, self.stdout_w = os.pipe()
        self.ready_r, self.ready_w = os.pipe()
        self.replay: front.Replay | None = None
        self.unread = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.replay = front.serve(_front(), self.ready_r, stdin=self.stdin_r,
                                  stdout=self.stdout_w)

    def send(self, data: bytes) -> None:
        os.write(self.stdin_w, data)

    def answer(self) -> dict[str, Any]:
        readable, _, _ = select.select([self.stdout_r], [], [], scaled(10))
        assert readable, "the front did not answer"
        data = b""
        while not data.endswith(b"\n"):
            data += os.read(self.stdout_r, 1 << 16)
        result: dict[str, Any] = json.loads(data)
        return result

    def handover(self) -> front.Replay:
        os.write(self.ready_w, b"x")
        self.thread.join(scaled(10))
        assert not self.thread.is_alive() and self.replay is not None
        os.close(self.stdin_w)
        self.stdin_w = os.open(os.devnull, os.O_WRONLY)
        self.unread = b""
        while chunk := os.read(self.stdin_r, 1 << 16):
            self.unread += chunk
        for fd in (self.stdin_r, self.stdin_w, self.stdout_r, self.stdout_w, self.ready_r,
                   self.ready_w):
            os.close(fd)
        return self.replay


def test_the_front_answers_before_the_full_gateway_is_ready_and_hands_over_what_it_read() -> None:
    pipes = _Pipes()
    init = _initialize(HANDSHAKE[-1])
    initialized = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    ping = _line({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    listing = _line({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    pipes.send(init[:10])
    pipes.send(init[10:] + b"\n" + initialized + b"\n")  # a line in two reads
    assert pipes.answer()["result"]["protocolVersion"] == HANDSHAKE[-1]
    pipes.send(ping + b"\n" + listing + b"\n" + b'{"jsonrpc":')
    assert pipes.answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}
    replay = pipes.handover()
    assert replay.head == init + b"\n" + initialized + b"\n" + ping + b"\n"
    assert replay.tail == listing + b"\n" + b'{"jsonrpc":'
    assert [rid for rid, _ in replay.answered] == [1, 2]


def test_a_first_line_not_taken_is_all_replayed_and_nothing_answered() -> None:
    pipes = _Pipes()
    sent = REFUSED["byte order mark"] + b"\n" + _initialize("2025-06-18") + b"\n"
    pipes.send(sent)
    replay = pipes.handover()
    assert replay.head == b"" and replay.answered == []
    assert replay.tail + pipes.unread == sent  # what the front did not read stays in the pipe


def test_the_end_of_input_is_left_to_the_full_gateway() -> None:
    pipes = _Pipes()
    pipes.send(_initialize("2025-06-18") + b"\n")
    assert pipes.answer()["id"] == 1
    os.close(pipes.stdin_w)
    pipes.stdin_w = os.open(os.devnull, os.O_WRONLY)  # closed again by handover
    replay = pipes.handover()
    assert pipes.unread == b""
    assert replay.head == _initialize("2025-06-18") + b"\n" and replay.tail == b""
