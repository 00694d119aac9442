"""`ChatStandIn`: an OpenAI endpoint on loopback — Chat Completions and Responses — whose model is
a byref script.

Owns the server and the Chat Completions wire both ways: a request as any OpenAI client sends it
(pydantic-ai, LangChain's ChatOpenAI, the Agents SDK, byref's `openai-chat:` adapter) is read
into the `Request` a `ScriptedModel` step reads, and the step's `Response` goes back as a
completion (or as its stream, when the client asks for one); `/v1/responses` is read and answered
the same way by `byref.testing.responses`. The law: the stand-in is a real HTTP server and the
client under test is the real SDK; only the model is scripted, so a framework example runs
offline, without a key, exactly as it runs against a provider.

    with ChatStandIn([call("export", {}), lambda r: say(str(last_result(r)))]):
        agent.run_sync("…")  # OPENAI_BASE_URL and OPENAI_API_KEY point here while open
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from byref.errors import MisuseError
from byref.harness.messages import Block, ChatMessage, Request, Response
from byref.harness.scripted import ScriptedModel, Step
from byref.testing.responses import (
    WireError,
    events,
    request_from_responses,
    response_object,
    text_of,
)

ENVIRONMENT = ("OPENAI_BASE_URL", "OPENAI_API_KEY")
"""What the stand-in sets while open: every OpenAI client reads these when it is created."""


class ChatStandIn:
    """An OpenAI server on 127.0.0.1 (a free port) playing `script` as the model, on
    `/v1/chat/completions` and `/v1/responses` alike (one script: turns play in arrival order).

    As a context manager it starts the server and points `OPENAI_BASE_URL` at it (with a
    placeholder `OPENAI_API_KEY`), restoring both on exit. `bodies` keeps every request body, so
    a test can audit what crossed the wire; `base_url` is the address to give a client directly.
    """

    def __init__(self, script: Sequence[Step] | ScriptedModel, *, model: str = "stand-in"
                 ) -> None:
        self.model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        self.name = model
        self.bodies: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._saved: dict[str, str | None] = {}
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The endpoint's base URL (`…/v1`), as `base_url=` or `OPENAI_BASE_URL` takes it."""
        if self._server is None:
            raise MisuseError("The stand-in is not running; use it as `with ChatStandIn(...):`.")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ChatStandIn:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="byref-chat-stand-in")
        self._thread.start()
        self._saved = {name: os.environ.get(name) for name in ENVIRONMENT}
        os.environ["OPENAI_BASE_URL"] = self.base_url
        os.environ["OPENAI_API_KEY"] = "byref-stand-in"  # read by no one: a client needs one
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The completion for one Chat Completions body: the script's next step, on the wire."""
        with self._lock:  # one model: turns are played in the order they arrive
            self.bodies.append(body)
            response = self.model.play(request_from_chat(body))
            return completion(response, model=self.name, turn=len(self.bodies))

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The `response` object for one Responses body: the script's next step, on the wire."""
        with self._lock:
            self.bodies.append(body)
            response = self.model.play(request_from_responses(body))
            return response_object(response, body, model=self.name, turn=len(self.bodies))


def request_from_chat(body: dict[str, Any]) -> Request:
    """A Chat Completions request body as the `Request` a script step reads: system and
    developer text as `system`, tool calls as `tool_use`, tool messages as `tool_result`."""
    system: list[str] = []
    messages: list[ChatMessage] = []
    for m in body.get("messages", []):
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(text_of(m.get("content")))
        elif role == "assistant":
            blocks = [Block("text", text=text_of(m.get("content")))] if m.get("content") else []
            for c in m.get("tool_calls") or []:
                fn = c.get("function", {})
                blocks.append(Block("tool_use", id=c.get("id", ""), name=fn.get("name", ""),
                                    input=json.loads(fn.get("arguments") or "{}")))
            messages.append(ChatMessage("assistant", tuple(blocks)))
        elif role == "tool":
            block = Block("tool_result", id=m.get("tool_call_id", ""),
                          text=text_of(m.get("content")))
            if messages and messages[-1].role == "user" and all(
                    b.type == "tool_result" for b in messages[-1].content):
                messages[-1] = ChatMessage("user", (*messages[-1].content, block))
            else:
                messages.append(ChatMessage("user", (block,)))
        else:
            messages.append(ChatMessage("user", (Block("text", text=text_of(m.get("content"))),)))
    return Request(system="\n\n".join(system), tools=tuple(body.get("tools") or ()),
                   messages=tuple(messages))


def completion(response: Response, *, model: str = "stand-in", turn: int = 1) -> dict[str, Any]:
    """A script step's `Response` as a `chat.completion` object."""
    text = "".join(b.text for b in response.blocks if b.type == "text")
    calls = [{"id": b.id or f"call_{turn}_{i}", "type": "function",
              "function": {"name": b.name, "arguments": json.dumps(b.input or {})}}
             for i, b in enumerate(response.blocks) if b.type == "tool_use"]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {"id": f"chatcmpl-stand-in-{turn}", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def _chunks(done: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as the `chat.completion.chunk`s of its stream (one delta, then the end)."""
    [choice] = done["choices"]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    if "tool_calls" in message:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    head = {"id": done["id"], "object": "chat.completion.chunk", "created": 0,
            "model": done["model"]}
    return [{**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {},
                                  "finish_reason": choice["finish_reason"]}],
             "usage": done["usage"]}]


def _handler(stand_in: ChatStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            path = self.path.rstrip("/")
            play = (stand_in.answer if path.endswith("/chat/completions")
                    else stand_in.respond if path.endswith("/responses") else None)
            if play is None:
                self._send(404, {"error": {"message": f"The stand-in answers only "
                                           f"/v1/chat/completions and /v1/responses, not "
                                           f"{self.path!r}.", "type": "not_found"}})
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            try:
                done = play(body)
            except WireError as exc:
                self._send(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                return
            except Exception as exc:  # the script ran out, or a step failed: the client hears
                self._send(500, {"error": {"message": f"The stand-in's script failed: {exc}",
                                           "type": "stand_in_script"}})
                return
            if body.get("stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if play == stand_in.respond:  # named events, and no [DONE], as OpenAI sends them
                    for event in events(done):
                        self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                                         .encode())
                    return
                for chunk in _chunks(done):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                return
            self._send(200, done)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
