"""The README's Python example runs and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs() -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python example"
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 26
    expected = re.search(r"print\(.*\)\s+# (.+)", code)
    assert expected is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue().strip() == expected.group(1).strip()


def test_readme_gateway_config_is_one_the_gateway_accepts() -> None:
    import json

    from byref.gateway.config import parse_config

    (block,) = re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.S)
    config = parse_config(json.loads(block), source="README", base=README.parent)
    assert [s.name for s in config.servers] == ["git", "filesystem"]
    assert config.usage == README.parent / "usage.jsonl"


def test_readme_own_loop_example_runs_against_a_messages_api_on_loopback(
        monkeypatch: Any) -> None:
    """The second example, unchanged, with the real `anthropic` SDK talking to a local server
    that answers like the Messages API: first a tool call, then the final text."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    code = blocks[1]
    assert len(code.strip().splitlines()) <= 25
    bodies: list[dict[str, Any]] = []
    usage = {"input_tokens": 10, "output_tokens": 5}
    replies = [
        {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
         "stop_reason": "tool_use", "stop_sequence": None, "usage": usage,
         "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather",
                      "input": {"city": "Paris"}}]},
        {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
         "stop_reason": "end_turn", "stop_sequence": None, "usage": usage,
         "content": [{"type": "text", "text": "It is 21 °C in Paris."}]},
    ]

    class Messages(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            payload = json.dumps(replies[len(bodies) - 1]).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Messages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_port}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert out.getvalue().strip() == "It is 21 °C in Paris."
    first, second = bodies
    assert {t["name"] for t in first["tools"]} >= {"weather", "read_result"}
    assert "$ref" in first["system"]
    result = second["messages"][-1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "toolu_1",
                      "content": '{"city":"Paris","temp_c":21}'}
