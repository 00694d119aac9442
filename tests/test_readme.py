"""The README's Python example runs and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from _waits import scaled
from byref.dispatch.outbound.reflines import ref_line

README = Path(__file__).resolve().parents[1] / "README.md"
TEAM = README.parent / "docs" / "TEAM.md"
GATEWAY = README.parent / "docs" / "GATEWAY.md"


def python_block(marker: str, *, twin: bool = False) -> str:
    """The README's one Python example containing `marker` (examples are found by what they
    say, not by position, so a new section elsewhere moves nothing); `twin`: its offline twin,
    the one whose model is byref's `ChatStandIn`."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    [code] = [b for b in blocks if marker in b and ("ChatStandIn" in b) == twin]
    return code


def run_example(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "readme"})
    return out.getvalue().strip()


def printed_comment(code: str) -> str:
    expected = re.search(r"print\(.*\)\s+# (.+)", code)
    assert expected is not None, "the example says what it prints in a comment"
    return expected.group(1).strip()


def test_readme_example_runs() -> None:
    code = python_block("Sum the late orders.")
    assert len(code.strip().splitlines()) <= 26
    assert run_example(code) == printed_comment(code)


def test_readme_code_mode_example_runs() -> None:
    from byref.tools.run_python.sandbox import Sandbox

    if (reason := Sandbox().unavailable()) is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    code = python_block("Which items are short?")
    assert run_example(code) == printed_comment(code)


def test_readme_gateway_config_is_one_the_gateway_accepts() -> None:
    import json

    from byref.gateway.config.file import parse_config

    [block] = [b for b in re.findall(r"```json\n(.*?)```", README.read_text(), flags=re.S)
               if '"usage"' in b]
    config = parse_config(json.loads(block), source="README", base=README.parent)
    assert [s.name for s in config.servers] == ["git", "filesystem"]
    assert config.usage == README.parent / "usage.jsonl"


def test_readme_gateway_settings_example_is_read_as_the_text_says() -> None:
    import json

    from byref.gateway.config.file import ConfigError, parse_config

    [block] = [b for b in re.findall(r"```json\n(.*?)```", GATEWAY.read_text(), flags=re.S)
               if '"callTool"' in b]
    raw = json.loads(block)
    config = parse_config(raw, source="README", environ={"REMOTE_TOKEN": "t0k"})
    assert [s.name for s in config.servers] == ["remote", "browser"]  # "old" is disabled
    remote, browser = config.servers
    assert remote.headers == {"Authorization": "Bearer t0k"} and remote.transport == "http"
    assert not browser.keeps("browser_install") and browser.keeps("browser_snapshot")
    assert (config.mode, config.always_load, config.call_tool) == (
        "search", ("browser__browser_snapshot",), "readOnly")
    try:
        parse_config(raw, source="README", environ={})
    except ConfigError as exc:
        assert str(exc) == ("Config 'README' server 'remote': 'headers.Authorization' uses "
                            "${REMOTE_TOKEN}, which is not set; set it or write "
                            "${REMOTE_TOKEN:-default}.")
    else:
        raise AssertionError("an unset variable must stop the gateway")


def test_readme_own_loop_example_runs_against_a_messages_api_on_loopback(
        monkeypatch: Any) -> None:
    """The second example, unchanged, with the real `anthropic` SDK talking to a local server
    that answers like the Messages API: first a tool call, then the final text."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    code = python_block("byref.Session(")
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
        server.server_close()
        thread.join(timeout=scaled(10))
    assert out.getvalue().strip() == "It is 21 °C in Paris."
    first, second = bodies
    # Nothing was stored, so no reader is declared: the tools cost ~400 characters a request
    # where the four readers made them ~4,800 (issue 25.10).
    assert [t["name"] for t in first["tools"]] == [t["name"] for t in second["tools"]] == [
        "weather"]
    assert len(json.dumps(first["tools"], separators=(",", ":"))) < 600
    assert "$ref" in first["system"]
    result = second["messages"][-1]["content"][0]
    assert result == {"type": "tool_result", "tool_use_id": "toolu_1",
                      "content": '{"city":"Paris","temp_c":21}\n' + ref_line(1, 0)}


def test_readme_async_example_runs_calls_concurrently_and_streams() -> None:
    code = python_block("await byref.Harness(")
    assert len(code.strip().splitlines()) <= 25
    assert run_example(code) == printed_comment(code)


def test_readme_openai_compatible_server_example_runs_against_chat_completions_on_loopback(
        monkeypatch: Any) -> None:
    """The example with the real `openai` SDK against a local server answering like an
    OpenAI-compatible Chat Completions endpoint (its URL swapped for the loopback one)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    code = python_block("base_url=")
    assert len(code.strip().splitlines()) <= 25
    bodies: list[dict[str, Any]] = []
    paths: list[str] = []
    auth: list[str | None] = []
    usage = {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}

    def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
        return {"id": f"chatcmpl-{len(bodies)}", "object": "chat.completion",
                "created": 1767225600, "model": "llama3.1", "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}]}

    replies = [
        completion({"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
            "tool_calls"),
        completion({"role": "assistant", "content": "It is 21 °C in Paris."}, "stop"),
    ]

    class Chat(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            paths.append(self.path)
            auth.append(self.headers.get("authorization"))
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            payload = json.dumps(replies[len(bodies) - 1]).encode()
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
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert "http://localhost:11434/v1" in code
    try:
        out = run_example(code.replace("http://localhost:11434/v1",
                                       f"http://127.0.0.1:{server.server_port}/v1"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=scaled(10))
    assert out == printed_comment(code)
    assert paths == ["/v1/chat/completions"] * 2
    assert auth == ["Bearer byref-no-key"] * 2  # keyless: a local server ignores it
    first, second = bodies
    assert first["model"] == "llama3.1" and "prompt_cache_key" not in first
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]  # nothing stored
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1",
                                      "content": '{"city":"Paris","temp_c":21}\n'
                                      + ref_line(2, 0)}


def _the_status_script() -> list[Any]:
    """The model's turns: the export, then `total` with the ref it was shown, then the total."""
    from byref.testing import call, last_result, say

    return [call("export_orders", {"month": "March"}),
            call("total", lambda r: {"orders": last_result(r)["value"]}),
            lambda r: say(str(last_result(r)))]


@pytest.mark.parametrize(("marker", "needs", "extra"), [
    # pydantic-ai's `openai-responses:` model
    ("byref.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    # `openai:gpt-6.1-sol` is LangChain's ChatOpenAI, which puts gpt-6 with tools on Responses
    ("byref.integrations.langchain", "langchain_openai", "langchain"),
    # `model="gpt-6.1-sol"` is the Agents SDK's OpenAI model, on Responses by default
    ("byref.integrations.openai_agents", "agents", "openai-agents"),
])
def test_readme_framework_example_runs_with_its_openai_model_on_loopback(
        monkeypatch: Any, marker: str, needs: str, extra: str) -> None:
    """Each framework example, unchanged, its model talking to an OpenAI endpoint on loopback
    that plays the model: every turn goes to gpt-6.1-sol on the Responses API, and the 20,000
    orders never go over the wire."""
    pytest.importorskip(needs, reason=f"needs the {extra} extra")
    import json

    from byref.testing import ChatStandIn

    code = python_block(marker)
    assert len(code.strip().splitlines()) <= 21
    if needs == "agents":
        from agents import set_tracing_disabled

        set_tracing_disabled(True)  # traces would go to api.openai.com; nothing else reads them
    with ChatStandIn(_the_status_script()) as stand_in:
        monkeypatch.setenv("OPENAI_API_KEY", "test")  # the key is set: as a user with one runs it
        assert run_example(code) == printed_comment(code)
    bodies = stand_in.bodies
    assert len(bodies) == 3 and len(json.dumps(bodies)) < 30_000
    assert [(b["model"], "input" in b, "messages" in b) for b in bodies] == [
        ("gpt-6.1-sol", True, False)] * 3  # Responses bodies, not Chat Completions ones


def test_readme_team_setup_is_one_byref_and_haproxy_accept(tmp_path: Path) -> None:
    """docs/TEAM.md (the README's "Running byref for a team" links it): the config is read
    by byref's own loader as the text says, the three commands by byref's own parser, and the
    haproxy.cfg by `haproxy -c` (when HAProxy is installed) with its servers on the ports the
    commands listen on."""
    import json
    import shlex
    import shutil
    import subprocess

    from byref.cli import build_parser
    from byref.gateway.config.file import parse_config

    assert "(docs/TEAM.md)" in README.read_text().split("## Running byref for a team\n", 1)[1]
    section = TEAM.read_text()
    [block, sharing] = re.findall(r"```json\n(.*?)```", section, flags=re.S)
    shared = parse_config(json.loads(sharing), source="README")
    filesystem, clock, github = shared.servers
    assert filesystem.roots == (("file:///srv/shared", None),) and clock.share == "all"
    assert github.prestart == "connect" and github.share is None
    assert (shared.pool_idle, shared.pool_max, shared.pool_max_per_tenant) == (300, 32, 8)
    config = parse_config(json.loads(block), source="README")
    assert config.replicas and config.state is not None and config.store is not None
    assert config.state.startswith("postgresql://") and config.store.startswith("s3://")
    assert config.jwt is not None and config.jwt.principal_claim == "sub"
    [(token, grant)] = config.tokens.items()
    assert token.startswith("sha256:") and grant.servers == ("git",)
    [commands] = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    *gateways, balancer = commands.strip().splitlines()
    ports = []
    for line in gateways:
        args = build_parser().parse_args(shlex.split(line)[1:])
        assert (args.command, args.config, args.transport) == ("gateway", "team.json", "http")
        ports.append(str(args.port))
    assert len(set(ports)) == 3 and balancer == "haproxy -f haproxy.cfg"
    [cfg] = re.findall(r"```haproxy\n(.*?)```", section, flags=re.S)
    assert re.findall(r"server \w+ 127\.0\.0\.1:(\d+) check", cfg) == ports
    haproxy = shutil.which("haproxy")
    if haproxy is not None:
        (tmp_path / "haproxy.cfg").write_text(cfg)
        checked = subprocess.run([haproxy, "-c", "-f", str(tmp_path / "haproxy.cfg")],
                                 capture_output=True, text=True, timeout=scaled(30))
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_readme_openai_compatible_twin_runs_offline_against_the_stand_in(
        monkeypatch: Any) -> None:
    """The Chat Completions example's twin, unchanged: no server, no key, byref's own
    `ChatStandIn` on loopback plays the model for the real `openai` client."""
    pytest.importorskip("openai", reason="needs the openai extra")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = python_block("openai-chat:llama3.1", twin=True)
    assert len(code.strip().splitlines()) <= 20
    assert run_example(code) == printed_comment(code)


@pytest.mark.parametrize(("marker", "needs", "extra"), [
    ("byref.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("byref.integrations.langchain", "langchain_openai", "langchain"),
    ("byref.integrations.openai_agents", "agents", "openai-agents"),
])
def test_readme_framework_twin_runs_offline_with_no_key(
        monkeypatch: Any, marker: str, needs: str, extra: str) -> None:
    """Each framework example's offline twin, unchanged, with no key and no base URL set: the
    stand-in points the framework's OpenAI client at itself while open, and restores both."""
    pytest.importorskip(needs, reason=f"needs the {extra} extra")
    import os

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = python_block(marker, twin=True)
    assert len(code.strip().splitlines()) <= 26
    assert run_example(code) == printed_comment(code)
    assert "OPENAI_API_KEY" not in os.environ and "OPENAI_BASE_URL" not in os.environ


def _eval_section() -> str:
    text = README.read_text()
    return text.split("## Measure it on your own model: byref eval\n", 1)[1].split("\n## ", 1)[0]


def test_readme_eval_example_prints_the_table_it_shows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The oracle's corpus table in the README is what the command prints (the wall-time and
    file lines after it vary)."""
    import shlex

    from byref.cli import main

    section = _eval_section()
    commands = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    [line] = commands[0].strip().splitlines()
    [shown] = re.findall(r"```\n(byref eval: .*?)```", section, flags=re.S)
    assert main([*shlex.split(line)[1:], "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:len(shown.splitlines())] == shown.splitlines()


def test_readme_eval_on_your_own_model_records_and_replays_against_the_stand_in(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    """The two own-model lines, as written, with only the base URL and the run directory
    pointed at byref's `ChatStandIn` (a real OpenAI-compatible server on loopback, its model
    the corpus lookup done by ref) and a scratch directory."""
    pytest.importorskip("openai", reason="needs the openai extra")
    import json
    import shlex

    from byref.cli import main
    from byref.eval.suites import corpus
    from byref.testing import ChatStandIn

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    record, replay = re.findall(r"```bash\n(.*?)```", _eval_section(), flags=re.S)[1] \
        .strip().splitlines()
    [lookup] = [t for t in corpus.tasks((50,)) if t.id == "lookup-50"]
    script = lookup.oracle("refs")
    assert isinstance(script, list)
    runs = str(tmp_path / "runs")
    with ChatStandIn(list(script)) as stand_in:
        args = shlex.split(record.replace("http://localhost:11434/v1", stand_in.base_url)
                           .replace("runs/", f"{runs}/"))[1:]
        assert main([*args, "--arms", "refs", "--out", str(tmp_path / "a")]) == 0
    first = json.loads((tmp_path / "a" / "eval.json").read_text())
    assert [(r["task"], r["arm"], r["verdict"]) for r in first["rows"]] \
        == [("lookup-50", "refs", "ok")]
    args = shlex.split(replay.replace("runs/", f"{runs}/"))[1:]
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b" / "eval.json").read_text())
    del first["timing"], again["timing"]
    assert again == first
    capsys.readouterr()
