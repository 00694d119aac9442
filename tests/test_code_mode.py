"""Code mode (`run_code`): tools called from the sandbox over refs, handles not bytes, and
every escape tried — each refused, the host unharmed."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from byref.events import Emitter, MemorySink
from byref.harness import Harness, ScriptedModel, call, say
from byref.jsonview import decode
from byref.store import FileStore, MemoryStore, Scope
from byref.tools import Payload, ToolContext, tool
from byref.tools.code_mode.run_code import CodeMode
from byref.tools.run_python.runner import Limits, SubprocessRunner
from byref.tools.run_python.sandbox import Sandbox
from byref.transcript import Part

ROWS = 250_000
BIG = ROWS * 14  # b"row-0000000,x\n"


def _runner() -> SubprocessRunner:
    reason = Sandbox().unavailable()
    if reason is not None:
        pytest.skip(f"no sandbox on this host: {reason}")
    return SubprocessRunner()


RELEASE = threading.Event()


def _tools(seen: list[Any]) -> list[Any]:
    @tool
    def stall() -> str:
        """Wait for the test to let go (at most 30 s)."""
        RELEASE.wait(30)
        return "late"

    @tool
    def lookup(sku: str) -> dict[str, Any]:
        """Look up one item's stock by sku."""
        return {"sku": sku, "stock": len(sku)}

    @tool
    def export(ctx: ToolContext) -> Payload:
        """Export every row as a large CSV."""
        data = b"".join(b"row-%07d,x\n" % i for i in range(ROWS))
        return Payload.from_bytes(data, media_type="text/csv", kind="dataset/csv")

    @tool
    def count_rows(data: str) -> dict[str, Any]:
        """Count the lines of a CSV."""
        seen.append(data)
        return {"rows": data.count("\n"), "bytes": len(data.encode())}

    @tool
    def delete_item(sku: str) -> str:
        """Delete an item for good."""
        seen.append(("deleted", sku))
        return "deleted"

    return [lookup, export, count_rows, delete_item, stall]


def _run(code: str, *, mode: CodeMode | None = None, store: Any = None, seen: Any = None,
         inputs: dict[str, Any] | None = None, emit: Emitter | None = None,
         scope: Scope | None = None) -> tuple[Part, Harness]:
    mode = mode or CodeMode(runner=_runner())
    args: dict[str, Any] = {"code": code} | ({"inputs": inputs} if inputs else {})
    h = Harness(ScriptedModel([call("run_code", args), say("done")]),
                _tools(seen if seen is not None else []), store=store or MemoryStore(),
                code_mode=mode, emit=emit, scope=scope)
    h.run_sync("go")
    results = [p for m in h.transcript for p in m.parts if p.type == "tool_result"]
    return results[-1], h


def _text(part: Part) -> str:
    return part.rendered or ""


# -- what the program gets and what the model gets ---------------------------------------------
def test_small_results_are_values_and_only_printed_output_returns() -> None:
    part, _ = _run("r = tools.lookup(sku='abc')\nsecret = tools.lookup(sku='zzzzzz')\n"
                   "print('stock', r['stock'])\n{'n': r['stock']}")
    text = _text(part)
    assert not part.is_error
    assert text.startswith("[run_code] 2 tool calls (lookup ×2); none refused; record art_")
    assert "stock 3" in text and '{"n":3}' in text
    assert "zzzzzz" not in text  # an inner result the program did not print never comes back


def test_a_parameter_named_like_a_python_keyword_leaves_the_tool_callable() -> None:
    """A schema with a `class` parameter (NESTFUL's hotel search has one) is no signature a
    Python function can have; the tool stays callable, that argument passed as **{...}."""
    from byref.tools import Tool

    got: list[Any] = []
    hotel = Tool(name="hotels", description="Search hotels.",
                 fn=lambda **given: got.append(given) or "found",
                 input_schema={"type": "object", "properties": {
                     "city": {"type": "string"}, "class": {"type": "string"}},
                     "required": ["city"]})
    program = "print(tools.hotels(city='Rome', **{'class': 'eco'}))"
    h = Harness(ScriptedModel([call("run_code", {"code": program}), say("done")]), [hotel],
                code_mode=CodeMode(runner=_runner()))
    h.run_sync("go")
    [part] = [p for m in h.transcript for p in m.parts if p.type == "tool_result"]
    assert not part.is_error and "found" in _text(part)
    assert got == [{"city": "Rome", "class": "eco"}]


def test_a_large_result_is_a_handle_passed_on_without_crossing_the_channel() -> None:
    seen: list[Any] = []
    part, _ = _run(
        "big = tools.export()\n"
        "print(type(big).__name__, big.kind, big.bytes)\n"
        "print(tools.count_rows(data=big))\n"
        "first = next(big.chunks(4096))\n"
        "print(first[:11])\n", seen=seen)
    text = _text(part)
    assert "Handle dataset/csv 3500000" in text, text
    assert "{'rows': 250000, 'bytes': 3500000}" in text
    assert "b'row-0000000'" in text
    assert seen[0][:11] == "row-0000000" and len(seen[0]) == BIG  # exact bytes, host-side


def test_a_handle_streams_in_chunks_and_reads_back_exactly() -> None:
    part, _ = _run("big = tools.export()\nn = sum(1 for _ in big.lines())\n"
                   "size = sum(len(c) for c in big.chunks(1 << 20))\nprint(n, size)")
    assert "250000 3500000" in _text(part)


def test_refs_the_model_wrote_into_inputs_are_handles() -> None:
    store = MemoryStore()
    scope = Scope("local", conversation="c1")
    meta = store.put_bytes(scope, b"a\nb\nc\n", kind="dataset/csv", media_type="text/csv") \
        if hasattr(store, "put_bytes") else None
    if meta is None:
        from byref.store import PutOptions
        meta = store.put(scope, b"a\nb\nc\n", PutOptions(kind="dataset/csv",
                                                          media_type="text/csv"))
    part, _ = _run("d = tools.inputs['data']\nprint(d.kind, tools.count_rows(data=d), "
                   "tools.inputs['n'])", store=store, scope=scope,
                   inputs={"data": {"$ref": {"type": "Blob", "key": meta.ref}}, "n": 7})
    assert "dataset/csv {'rows': 3, 'bytes': 6} 7" in _text(part)


def test_discovery_from_code_search_and_help() -> None:
    part, _ = _run("print(tools.search('delete an item')[0]['name'])\nhelp(tools.lookup)\n"
                   "print(sorted(n for n in dir(tools) if not n.startswith('_'))[:3])")
    text = _text(part)
    assert "delete_item" in text
    assert "lookup(*, sku)" in text and "Look up one item's stock by sku." in text


def test_several_calls_at_once_keep_their_order_and_their_refusals() -> None:
    part, _ = _run("out = tools.gather([('lookup', {'sku': 'a'}), ('nope', {}), "
                   "('lookup', {'sku': 'bbb'})], return_exceptions=True)\n"
                   "print([o if isinstance(o, dict) else type(o).__name__ for o in out])")
    text = _text(part)
    assert ("[{'sku': 'a', 'stock': 1}, 'ToolError', {'sku': 'bbb', 'stock': 3}]" in text)
    assert "refused: nope (unknown-tool) ×1" in text


def test_a_refusal_from_dispatch_reaches_the_code_and_the_summary_with_its_own_reason() -> None:
    part, _ = _run("for name, args in [('nope', {}), ('lookup', {'sku': 7}), "
                   "('count_rows', {'data': {'$ref': {'type': 'Blob'}}}), ('lookup', {})]:\n"
                   "    try:\n        tools.call(name, args)\n"
                   "    except tools.ToolError as e:\n        print(name, e.reason)")
    text = _text(part)
    assert "nope unknown-tool\nlookup invalid-input\ncount_rows bad-ref\nlookup invalid-" in text
    assert "refused: " in text and "nope (unknown-tool) ×1" in text
    assert "count_rows (bad-ref) ×1" in text and "(refused)" not in text


def test_each_inner_call_is_recorded_with_its_lineage() -> None:
    part, h = _run("tools.lookup(sku='a')\ntools.lookup(sku='b')")
    record_ref = _text(part).split("record ")[1].split(".")[0]
    assert h.store is not None
    data = h.store.get(h.scope, record_ref)
    assert data is not None and data.meta.kind == "record/code-run"
    lines = [decode(line) for line in data.data.splitlines()]
    run_id = next(p for m in h.transcript for p in m.parts if p.type == "tool_call").call_id
    calls = [ln["parts"][0] for ln in lines if ln["role"] == "assistant"]
    assert [c["call_id"] for c in calls] == [f"{run_id}.1", f"{run_id}.2"]
    assert [c["value"]["input"] for c in calls] == [{"sku": "a"}, {"sku": "b"}]
    # The conversation holds the run and its result only: no inner call is a turn of its own.
    assert [m.role for m in h.transcript] == ["user", "assistant", "tool", "assistant"]


# -- limits and refusals -----------------------------------------------------------------------
def test_more_inner_calls_than_the_cap_are_refused_catchably() -> None:
    part, _ = _run("ok = 0\nfor i in range(5):\n    try:\n        tools.lookup(sku='a')\n"
                   "        ok += 1\n    except tools.ToolError as e:\n"
                   "        print(e.reason)\nprint('ok', ok)",
                   mode=CodeMode(runner=_runner(), max_calls=3))
    text = _text(part)
    assert "ok 3" in text and text.count("limit-calls") >= 2
    assert "3 tool calls (lookup ×3); refused: lookup (limit-calls) ×2" in text


def test_a_tool_not_read_only_is_refused_under_read_only() -> None:
    seen: list[Any] = []
    part, _ = _run("try:\n    tools.delete_item(sku='a')\nexcept tools.ToolError as e:\n"
                   "    print('refused:', e.reason, e.text)\nprint(tools.lookup(sku='a'))",
                   seen=seen, mode=CodeMode(runner=_runner(), call_tool="readOnly",
                                            read_only=lambda t: t.name == "lookup"))
    text = _text(part)
    assert "refused: not-permitted call_tool runs only read-only tools here" in text
    assert "'delete_item' may change things" in text
    assert seen == []  # the tool never ran
    assert "refused: delete_item (not-permitted) ×1" in text


def test_code_cannot_start_code() -> None:
    part, _ = _run("try:\n    tools.run_code(code='1')\nexcept tools.ToolError as e:\n"
                   "    print(e.reason)")
    assert "not-permitted" in _text(part)


def test_an_inner_call_past_its_timeout_is_dropped() -> None:
    RELEASE.clear()
    try:
        part, _ = _run("try:\n    tools.stall()\nexcept tools.ToolError as e:\n"
                       "    print(e.reason, e.text)\nprint(tools.lookup(sku='a'))",
                       mode=CodeMode(runner=_runner(), call_timeout=0.5))
    finally:
        RELEASE.set()
    text = _text(part)
    assert "call-timeout Tool 'stall' did not finish within 0.5s" in text
    assert "{'sku': 'a', 'stock': 1}" in text and "late" not in text


def test_the_run_wall_clock_covers_inner_calls() -> None:
    part, _ = _run("while True:\n    tools.lookup(sku='a')",
                   mode=CodeMode(runner=_runner(), max_calls=10**9,
                                 limits=Limits(wall_seconds=2.0)))
    assert part.is_error and "wall-clock limit" in _text(part)
    assert "[run_code]" in _text(part) and "lookup ×" in _text(part)


def test_where_no_sandbox_can_be_made_code_mode_refuses() -> None:
    runner = SubprocessRunner(sandbox=Sandbox(bwrap=None, unshare=None))
    part, _ = _run("print(1)", mode=CodeMode(runner=runner))
    assert part.is_error
    assert "cannot run code on this host: code runs only in an isolated sandbox" in _text(part)


# -- escapes, one test each --------------------------------------------------------------------
def test_the_child_cannot_reach_the_store(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    part, _ = _run(f"import os\ntry:\n    print(os.listdir({str(tmp_path / 'store')!r}))\n"
                   "except OSError as e:\n    print('refused', type(e).__name__)",
                   store=store)
    assert "refused FileNotFoundError" in _text(part)


def test_another_scopes_artifact_by_forged_handle_or_ref_is_refused() -> None:
    store = MemoryStore()
    from byref.store import PutOptions
    other = store.put(Scope("local", conversation="other"), b"secret-bytes",
                      PutOptions(kind="dataset/csv", media_type="text/csv"))
    code = (
        f"for arg in [{{'$handle': 'h1'}}, {{'$ref': {{'type': 'Blob', 'key': {other.ref!r}}}}}]:\n"
        "    try:\n        print(tools.count_rows(data=arg))\n"
        "    except tools.ToolError as e:\n        print('refused', e.reason)\n"
        f"forged = tools.Handle({{'id': 'h7', 'ref': {other.ref!r}}}, tools._channel)\n"
        "try:\n    forged.read()\nexcept tools.ToolError as e:\n    print('read refused', e.reason)"
    )
    part, _ = _run(code, store=store, scope=Scope("local", conversation="mine"))
    text = _text(part)
    assert text.count("refused") >= 3 and "secret-bytes" not in text
    assert "read refused bad-ref" in text


def test_a_handle_minted_in_another_conversation_is_refused() -> None:
    store = MemoryStore()
    first, _ = _run("big = tools.export()\nbig.ref", store=store,
                    scope=Scope("local", conversation="first"))
    key = _text(first).split("\n")[-2]
    assert key.startswith("art_"), _text(first)
    ref = {"$ref": {"type": "Blob", "key": key}}
    part, _ = _run(f"try:\n    tools.count_rows(data={ref!r})\n"
                   "except tools.ToolError as e:\n    print('refused', e.reason, e.text[:120])",
                   store=store, scope=Scope("local", conversation="second"))
    assert ("refused bad-ref Tool 'count_rows' did not run: argument 'data' is a reference that "
            "cannot be used.") in _text(part)
    assert "row-0000000" not in _text(part)


def test_the_child_cannot_reach_an_upstream_directly() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.setblocking(False)
    try:
        part, _ = _run("import socket\ntry:\n"
                       f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                       "    print('connected')\nexcept OSError as e:\n"
                       "    print('refused', type(e).__name__)")
        assert "refused PermissionError" in _text(part)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever arrived
    finally:
        listener.close()


def test_the_child_cannot_reach_the_network_even_past_the_audit_hook() -> None:
    # ctypes calls socket(2) without Python's socket module: the syscall filter refuses it (and
    # behind it, the empty network namespace has no route out).
    part, _ = _run(
        "import ctypes, struct\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(2, 1, 0)\nprint('socket', fd, 'errno', ctypes.get_errno())\n"
        "addr = struct.pack('!HH4s8x', 2, 80, bytes([1, 1, 1, 1]))\n"
        "addr = struct.pack('H', 2) + addr[2:]\n"
        "rc = libc.connect(fd, addr, len(addr))\n"
        "print('rc', rc, 'errno', ctypes.get_errno())")
    text = _text(part)
    assert "socket -1 errno 1\n" in text  # EPERM
    assert "rc -1 errno 9\n" in text  # EBADF: there is no socket to connect


def test_the_child_cannot_read_the_host_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BYREF_TEST_SECRET", "s3cret-value")
    part, _ = _run("import os\nprint(sorted(os.environ))\ntry:\n"
                   "    print(open('/proc/1/environ', 'rb').read().count(b's3cret'))\n"
                   "except OSError as e:\n    print('denied', type(e).__name__)")
    text = _text(part)
    assert "s3cret" not in text and "BYREF_TEST_SECRET" not in text


@pytest.mark.parametrize(("forgery", "said"), [
    ("b'\\x00\\x00\\x00\\x05hello'", "not a request"),
    ("b'\\xff\\xff\\xff\\xff'", "over the channel's limit"),
    ("msgspec.msgpack.encode({'op': 'call', 'id': 1, 'tool': 'lookup', 'args': {}})",
     "ids must increase"),
])
def test_forged_channel_frames_are_refused_and_the_host_unharmed(forgery: str,
                                                                 said: str) -> None:
    sink = MemorySink()
    prefix = "" if forgery.startswith("b") else "import struct\n"
    body = forgery if forgery.startswith("b") else (
        f"(lambda b: struct.pack('>I', len(b)) + b)({forgery})")
    code = (f"import os, msgspec\n{prefix}tools.lookup(sku='a')\n"
            f"os.write(tools._channel.fd, {body})\n"
            "try:\n    tools.lookup(sku='b')\nexcept tools.ToolError as e:\n"
            "    print('closed', e.reason)")
    part, h = _run(code, emit=Emitter(sink))
    text = _text(part)
    assert "closed channel-protocol" in text
    assert f"the tool channel was closed: {said}" in text or said in text
    assert any(e.name == "refused" and e.data.get("reason") == "channel-protocol"
               for e in sink.events)
    # The host is unharmed: the same session runs the next program as if nothing happened.
    again = h.dispatcher.dispatch(
        __import__("byref.dispatch", fromlist=["Call"]).Call(
            "again", "run_code", {"code": "print(tools.lookup(sku='ok'))"}),
        call_seq=1, seq=2, part=0)
    assert "{'sku': 'ok', 'stock': 2}" in (again.rendered or "")


def test_the_channel_descriptor_is_not_in_the_environment() -> None:
    part, _ = _run("import os\nprint('BYREF_CHANNEL_FD' in os.environ)")
    assert "False" in _text(part)
    assert os.environ.get("BYREF_CHANNEL_FD") is None
