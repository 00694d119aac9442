"""The async `Model` port over each real SDK's async client, on its wire (mock transport):
`await harness.run(...)` sends the very bodies the blocking client sends, and a streaming
callback receives each turn's text and tool-call fragments, which add up to the turn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from _waits import scaled
from byref.harness import Harness
from byref.harness.messages import Delta, TextDelta, ToolCallDelta
from byref.harness.providers import model_from_id
from byref.harness.session import run_blocking
from doubles.chat_wire import c_call, c_completion, c_results, c_sse
from doubles.wire import (
    ROWS_REF,
    Wire,
    a_message,
    a_sse,
    a_text,
    a_tool_use,
    a_turn,
    count,
    fetch,
    o_call,
    o_outputs,
    o_response,
    o_sse,
    o_text,
)

Play = Callable[[dict[str, Any]], httpx2.Response]


def anthropic(body: dict[str, Any]) -> httpx2.Response:
    turn = a_turn(body)
    if turn == 0:
        return a_sse(a_message(a_text("Fetching the project."),
                               a_tool_use("fetch", {"project": "ATLAS"}, id="toolu_1")))
    if turn == 1:
        return a_sse(a_message(a_tool_use("count", {"rows": ROWS_REF}, id="toolu_2")))
    return a_sse(a_message(a_text("There are 3 rows in ATLAS.")))


def openai(body: dict[str, Any]) -> httpx2.Response:
    turn = o_outputs(body)
    if turn == 0:
        return o_sse(o_response(o_text("Fetching the project."),
                                o_call("fetch", {"project": "ATLAS"}, "call_1")))
    if turn == 1:
        return o_sse(o_response(o_call("count", {"rows": ROWS_REF}, "call_2")))
    return o_sse(o_response(o_text("There are 3 rows in ATLAS.")))


def openai_chat(body: dict[str, Any]) -> httpx2.Response:
    turn = c_results(body)
    if turn == 0:
        return c_sse(c_completion("Fetching the project.",
                                  c_call("fetch", {"project": "ATLAS"}, id="call_1")))
    if turn == 1:
        return c_sse(c_completion(None, c_call("count", {"rows": ROWS_REF}, id="call_2")))
    return c_sse(c_completion("There are 3 rows in ATLAS."))


CASES = [("anthropic:claude-sonnet-4-6", anthropic), ("openai:gpt-5", openai),
         ("openai-chat:gpt-4o", openai_chat)]


def build(model_id: str, wire: Wire, *, blocking: bool, stream: bool = False) -> Any:
    http = wire.client() if blocking else wire.async_client()
    return model_from_id(model_id, api_key="test", http_client=http, max_retries=0,
                         stream=stream)


@pytest.mark.parametrize(("model_id", "play"), CASES)
def test_the_async_client_sends_what_the_blocking_one_sends(model_id: str, play: Play) -> None:
    plain, native = Wire(play), Wire(play)
    blocking = Harness(build(model_id, plain, blocking=True, stream=True), [fetch, count],
                       system="Be brief.")
    awaited = Harness(build(model_id, native, blocking=False, stream=True), [fetch, count],
                      system="Be brief.")
    assert awaited.model.is_async and not blocking.model.is_async
    first = blocking.run_sync("How many?")
    second = asyncio.run(awaited.run("How many?"))
    assert first.text == second.text == "There are 3 rows in ATLAS."
    assert native.bodies == plain.bodies and len(native.bodies) == 3
    assert [c.input for c in second.calls] == [{"project": "ATLAS"}, {"rows": ROWS_REF}]


@pytest.mark.parametrize("blocking", [False, True], ids=["async-client", "blocking-client"])
@pytest.mark.parametrize(("model_id", "play"), CASES)
def test_the_callback_gets_each_fragment_and_they_add_up_to_the_turn(
        model_id: str, play: Play, blocking: bool) -> None:
    wire = Wire(play)
    harness = Harness(build(model_id, wire, blocking=blocking), [fetch, count])
    got: list[tuple[int, Delta]] = []
    loop_thread: list[bool] = []

    async def main() -> Any:
        import threading

        here = threading.get_ident()

        def on_delta(delta: Delta) -> None:
            loop_thread.append(threading.get_ident() == here)
            got.append((len(harness.requests), delta))

        return await harness.run("How many?", on_delta=on_delta)

    run = asyncio.run(main())
    # A callback streams the turn even though the model was built with stream=False.
    assert all(body.get("stream") is True for body in wire.bodies)
    assert loop_thread and all(loop_thread)  # called on the event loop, never a worker thread
    texts = {turn: "".join(d.text for t, d in got if t == turn and isinstance(d, TextDelta))
             for turn in (1, 2, 3)}
    assert texts == {1: "Fetching the project.", 2: "", 3: "There are 3 rows in ATLAS."}
    assert sum(isinstance(d, TextDelta) for _, d in got) > 3  # fragments, not whole turns
    for turn, call in ((1, run.calls[0]), (2, run.calls[1])):
        pieces = [d for t, d in got if t == turn and isinstance(d, ToolCallDelta)]
        assert {d.index for d in pieces} == {0}
        assert [d.id for d in pieces if d.id] == [call.id]
        assert [d.name for d in pieces if d.name] == [call.name]
        assert json.loads("".join(d.arguments for d in pieces)) == call.input
    assert run.text == "There are 3 rows in ATLAS."


def test_run_sync_again_and_again_through_one_async_client_on_a_keep_alive_server() -> None:
    """An async client's pooled connection belongs to the loop that opened it: every blocking
    call shares one loop, so the second run (and a second harness) reuse it without error."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    served: list[str] = []

    class Chat(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the client pools the connection

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            served.append(body["messages"][-1]["content"])
            payload = json.dumps(c_completion(f"echo {served[-1]}")).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    m = model_from_id("openai-chat:llama3.1", max_retries=0,
                      base_url=f"http://127.0.0.1:{server.server_port}/v1")
    try:
        assert m.is_async
        texts = [Harness(m, []).run_sync(q).text for q in ("a", "b")]
        texts.append(Harness(m, []).run_sync("c").text)
    finally:
        # The pooled connection is closed on the loop that opened it (the blocking calls'
        # shared one), and the listening socket with the server: neither is left to the GC.
        run_blocking(m.client.close(), "client.close()", "await client.close()")
        server.shutdown()
        server.server_close()
        thread.join(timeout=scaled(10))
    assert texts == ["echo a", "echo b", "echo c"]
