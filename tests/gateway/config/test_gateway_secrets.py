"""A server entry's configured values never reach a client: whatever a server's `headers`, `env`,
`args` or URL (user, password, query) hold, and however its connection fails — httpx refuses a
header value, the port is closed, it answers 401 or 500 quoting the request, the process exits,
hangs or crashes after writing the value to stderr, writes it to stdout as garbage, or refuses a
call with a JSON-RPC error quoting it — tools/list's search_tools description, call_tool's
refusals and `/readyz` hold none of it. The operator's text (`gateway.failures`, the log) still
says what happened."""

from __future__ import annotations

import base64
import json
import string
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import anyio
import pytest
from _gateway_rig import World, running
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from _tiers import examples
from _waits import scaled
from byref.gateway.edge.ops import readiness

LEAKY = '''
import json, os, sys, time
mode, secret = sys.argv[1], " ".join(sys.argv[2:]) + os.environ.get("LEAKY", "")
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
if mode in ("exit", "hang"):
    sys.stderr.write(f"fatal: bad credential {secret!r}\\n"); sys.stderr.flush()
    if mode == "exit":
        sys.exit(3)
    time.sleep(60)
if mode == "encoded":
    import base64, urllib.parse
    raw = secret.encode()
    sys.stderr.write(" ".join([
        base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode().rstrip("="),
        base64.b64encode(b"user:" + raw).decode(), raw.hex(), raw.hex().upper(),
        urllib.parse.quote(secret, safe="")]) + "\\n")
    sys.exit(3)
if mode == "garble":
    sys.stdout.write(f"not json-rpc: {secret}\\n"); sys.stdout.flush()
for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "leaky", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [{"name": "echo",
              "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call" and mode == "refuse":
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602,
              "message": f"token {secret!r} rejected; also {json.dumps(secret)}"}})
    elif method == "tools/call":
        sys.stderr.write(f"crashing with {secret}\\n"); sys.stderr.flush()
        os._exit(4)
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
'''

STDIO_FAILURES = ("exit", "hang", "garble", "refuse", "crash")
HTTP_FAILURES = ("closed", "401", "500")


@pytest.fixture(scope="module")
def echo_http() -> Iterator[int]:
    """A loopback HTTP server answering every request with the status its path names, quoting
    the request's Authorization header and target in the body."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            status = 401 if "/401/" in self.path else 500
            body = json.dumps({"error": "no", "auth": self.headers.get("Authorization"),
                               "target": self.path}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("WWW-Authenticate", f"Bearer error={self.path!r}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(10)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(world: World, port: int, where: str, failure: str, value: str) -> dict[str, Any]:
    if where in ("env", "args"):
        script = world.root / "leaky.py"
        if not script.exists():
            script.write_text(LEAKY)
        import sys

        entry: dict[str, Any] = {"command": sys.executable, "args": [str(script), failure],
                                 "timeout": 1.5}
        if where == "env":
            entry["env"] = {"LEAKY": value}
        else:
            entry["args"].append(value)
        return entry
    target = _closed_port() if failure == "closed" else port
    base = f"127.0.0.1:{target}/{failure}/mcp"
    if where == "header":
        return {"type": "http", "url": f"http://{base}", "headers": {"Authorization": value},
                "timeout": 3}
    if where == "password":
        return {"type": "http", "url": f"http://user:{value.strip()}@{base}", "timeout": 3}
    return {"type": "http", "url": f"http://{base}?token={value.strip()}", "timeout": 3}


async def _client_texts(world: World, entry: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    texts: list[str] = []
    async with running(world, {"leaky": entry}) as (gateway, server), Client(server) as client:
        await gateway.toolbox()  # settled: a first list does not wait for servers starting
        listed = await client.list_tools()
        texts += [t.description or "" for t in listed.tools]
        for _ in range(2):  # the first call and the one that starts it again
            called = await client.call_tool("call_tool", {"name": "leaky__echo",
                                                          "arguments": {}})
            texts += [getattr(c, "text", "") for c in called.content]
        found = await client.call_tool("search_tools", {"query": "echo"})
        texts += [getattr(c, "text", "") for c in found.content]
        texts.append(json.dumps(await readiness(gateway)))
        return texts, dict(gateway.failures)


SECRET = st.text(string.ascii_letters + string.digits, min_size=12, max_size=24).map(
    lambda core: "sk" + core)


@settings(max_examples=examples(30), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(core=SECRET, where=st.sampled_from(["header", "env", "args", "password", "query"]),
       wrap=st.sampled_from([("", ""), ("Bearer ", ""), ("Bearer ", "\n"), ("", "\r\n"),
                             ("", " ")]),
       data=st.data())
def test_configured_values_never_reach_a_client(world: World, echo_http: int, core: str,
                                                where: str, wrap: tuple[str, str],
                                                data: st.DataObject) -> None:
    failure = data.draw(st.sampled_from(
        STDIO_FAILURES if where in ("env", "args") else HTTP_FAILURES), label="failure")
    value = wrap[0] + core + wrap[1]
    entry = _entry(world, echo_http, where, failure, value)

    async def probe() -> tuple[list[str], dict[str, str]]:
        with anyio.fail_after(scaled(60)):
            return await _client_texts(world, entry)

    texts, _ = anyio.run(probe)
    for text in texts:
        assert core not in text, (where, failure, text)
    assert any("Server 'leaky'" in t for t in texts), texts  # the client is told which server


def test_the_header_httpx_refuses_names_the_class_to_clients_and_all_to_the_operator(
        world: World, echo_http: int) -> None:
    token = "sk-live-0123456789abcdef"
    entry = {"type": "http", "url": f"http://127.0.0.1:{echo_http}/401/mcp",
             "headers": {"Authorization": f"Bearer {token}\n"}, "timeout": 3}

    async def probe() -> tuple[list[str], dict[str, str]]:
        with anyio.fail_after(scaled(60)):
            return await _client_texts(world, entry)

    texts, failures = anyio.run(probe)
    assert all(token not in t for t in texts)
    said = "Server 'leaky' could not be started: its connection failed (LocalProtocolError)."
    assert any(f"Unavailable now: {said}" in t for t in texts)  # search_tools' description
    assert f"'leaky__echo' cannot run now: {said}" in texts  # call_tool's refusal
    assert "Illegal header value" in failures["leaky"]  # the operator's text says what it was
    assert "Illegal header value b'\\u2026'" in texts[-1]  # /readyz: why, the value taken out


def _encodings(value: str) -> list[str]:
    raw = value.encode()
    out = []
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for before in (b"", b"u", b"us", b"user:"):
            for after in (b"", b"x", b"xy"):
                out.append(encode(before + raw + after).decode())
                out.append(out[-1].rstrip("="))
    return [*out, raw.hex(), raw.hex().upper(), quote(value, safe=""), quote_plus(value)]


@pytest.mark.parametrize("where", ["env", "args"])
def test_readyz_holds_no_encoding_of_a_value_a_failing_server_printed(
        world: World, echo_http: int, where: str) -> None:
    secret = "sk-Live+0123/456789abcdef~"
    entry = _entry(world, echo_http, where, "encoded", secret)

    async def probe() -> tuple[list[str], dict[str, str]]:
        with anyio.fail_after(60):
            return await _client_texts(world, entry)

    texts, failures = anyio.run(probe)
    readyz = json.loads(texts[-1])["upstreams"]["failures"]["leaky"]
    assert "exited with code 3" in readyz, readyz
    printed = base64.b64encode(secret.encode()).decode()
    assert printed in failures["leaky"]  # the operator's own text says what was printed
    for text in texts:
        for form in [secret, *_encodings(secret)]:
            assert form not in text, (form, text)


@settings(max_examples=200, deadline=None)
@given(value=st.text(min_size=12, max_size=40).filter(lambda v: v.strip() == v),
       before=st.binary(max_size=5), after=st.binary(max_size=5))
def test_redaction_takes_out_the_value_in_any_base64_text_holding_it(
        value: str, before: bytes, after: bytes) -> None:
    from byref.gateway.config.file import parse_config
    from byref.gateway.config.secrets import redactor

    config = parse_config({"mcpServers": {"r": {"command": "x", "env": {"K": value}}}},
                          source="test")
    redact = redactor(config.servers[0])
    raw = value.encode()
    # The characters of a base64 text that only the value's bytes decide: none of any 12 of
    # them in a row may be left (what stays around the mask is under 12, a space on each side).
    start, end = -(-8 * len(before) // 6), 8 * (len(before) + len(raw)) // 6
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode(before + raw + after).decode()
        left = redact(f"said {text} and {text.rstrip('=')}")
        assert not any(text[i:i + 12] in left for i in range(start, end - 11)), (text, left)
    for form in (raw.hex(), raw.hex().upper(), quote(value, safe=""), quote_plus(value)):
        assert form not in redact(f"[{form}]"), form


def test_a_basic_credential_is_taken_out_decoded_too() -> None:
    from byref.gateway.config.file import parse_config
    from byref.gateway.config.secrets import redactor

    basic = base64.b64encode(b"alice:hunter2-xyz").decode()
    config = parse_config({"mcpServers": {"r": {"type": "http", "url": "https://h.example/mcp",
                                                "headers": {"Authorization": f"Basic {basic}"}}}},
                          source="test")
    redact = redactor(config.servers[0])
    assert redact(f"401 for alice:hunter2-xyz ({basic})") == "401 for … (…)"


def test_redaction_takes_out_every_form_a_message_quotes(tmp_path: Path) -> None:
    from byref.gateway.config.file import parse_config
    from byref.gateway.config.secrets import redactor

    config = parse_config({"mcpServers": {"r": {
        "type": "http", "url": "https://bob:pa55w0rd!@h.example/mcp?key=qk-123456#frag-77777",
        "headers": {"Authorization": "Bearer tok-abcdef\n"}}}}, source="test")
    redact = redactor(config.servers[0])
    said = ("b'Bearer tok-abcdef\\n' 'Bearer tok-abcdef\\n' \"Bearer tok-abcdef\\n\" tok-abcdef "
            "pa55w0rd! pa55w0rd%21 qk-123456 frag-77777 Bearer%20tok-abcdef%0A")
    cleaned = redact(said)
    for part in ("tok-abcdef", "pa55w0rd", "qk-123456", "frag-77777"):
        assert part not in cleaned, cleaned
    assert redact("Server 'r' refused 'x': -y is short") == "Server 'r' refused 'x': -y is short"
