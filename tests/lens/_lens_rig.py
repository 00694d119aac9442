"""A run directory with one of everything the lens renders, made by a real harness run."""

from __future__ import annotations

import io
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.discovery import Catalog, Discovery
from byref.events import Emitter, JsonLinesSink
from byref.harness import Harness, ScriptedModel, call, last_result, say
from byref.store import FileStore, Scope
from byref.tools import BUILTIN_JSON_TOOLS, Payload, Tool, tool
from byref.transcript import Transcript

SCOPE = Scope("acme", "alice", "kinds")
HOSTILE = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"
MISSING = "art_0000000000000000000000"


BYREF = [sys.executable, "-m", "byref.cli"]
SCREENSHOTS: list[Path] = []
"""Screenshots the browser tests saved; the terminal summary names them."""


def artifacts_dir() -> Path:
    """Where screenshots go: $BYREF_TEST_ARTIFACTS, else byref-test-artifacts/lens in the
    system temp dir (pytest's own temp dirs are rotated away by later runs)."""
    chosen = os.environ.get("BYREF_TEST_ARTIFACTS")
    path = Path(chosen) if chosen else Path(tempfile.gettempdir()) / "byref-test-artifacts" / "lens"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class DemoRun:
    out: Path
    report: dict[str, Any]


def png_bytes() -> bytes:
    from PIL import Image

    image = Image.new("RGB", (40, 24), (200, 30, 30))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def kinds_tools() -> list[Tool]:
    @tool
    def snapshot() -> Payload:
        """Take a picture."""
        return Payload.from_bytes(png_bytes(), "image/png", kind="image/snapshot", label="snap")

    @tool
    def server_log() -> Payload:
        """Fetch the server log."""
        text = "".join(f"line {i}: ok {HOSTILE if i == 3 else ''}\n" for i in range(1, 41))
        return Payload.from_bytes(text.encode(), "text/plain", kind="log/text", label="log")

    @tool
    def core_dump() -> Payload:
        """Fetch a core dump."""
        return Payload.from_bytes(bytes(range(256)) * 4, "application/x-core",
                                  kind="dump/core", label="core")

    @tool
    def list_users() -> Payload:
        """List users as a JSON array."""
        import msgspec

        rows = [{"id": f"u{i}", "name": f"user {i}", "note": HOSTILE} for i in range(120)]
        return Payload.from_bytes(msgspec.json.encode(rows), "application/json",
                                  kind="users/json", label="users")

    return [snapshot, server_log, core_dump, list_users]


def catalog() -> Catalog:
    invoice = Tool(name="archive_invoice", description="Archive a paid invoice by its number.",
                   fn=lambda number="": f"archived {number}",
                   input_schema={"type": "object", "properties": {"number": {"type": "string"}}},
                   capabilities=("billing.invoice",))
    others = [Tool(name=f"widget_op_{i}", description=f"Operate widget number {i}.",
                   fn=lambda x="": x, input_schema={"type": "object", "properties": {
                       "x": {"type": "string"}}}, capabilities=("widget.op",))
              for i in range(12)]
    return Catalog([invoice, *others])


def make_kinds_run(out: Path) -> dict[str, Any]:
    """Run the script; return the refs each tool minted, by tool name."""
    out.mkdir(parents=True, exist_ok=True)
    emit = Emitter(JsonLinesSink(out / "trace.jsonl"))
    store = FileStore(out / "store", emit=emit)

    def key(r: Any) -> dict[str, Any]:
        return dict(last_result(r)["value"])

    refs: dict[str, Any] = {}

    def remember(name: str) -> Any:
        def step(r: Any) -> dict[str, Any]:
            refs[name] = key(r)["$ref"]["key"]
            return {}
        return step

    def users(r: Any) -> dict[str, Any]:
        refs["users"] = key(r)["$ref"]["key"]
        return {"source": key(r), "limit": 5}

    script = ScriptedModel([
        call("search_tools", {"query": "archive a paid invoice"}),
        call("activate_tool", lambda r: {"names": [last_result(r)["results"][0]["name"]]}),
        call("archive_invoice", {"number": "INV-7"}),
        call("snapshot", {}),
        call("server_log", remember("snapshot")),
        call("core_dump", remember("server_log")),
        call("list_users", remember("core_dump")),
        call("read_json", users),  # refused: read_json has no `limit`
        call("read_result", lambda r: {"ref": {"$ref": {"type": "Blob", "key": refs["users"]}},
                                       "limit": 5}),
        call("read_json", {"source": {"$ref": {"type": "Blob", "key": MISSING}}}),
        say(HOSTILE),
    ])
    with Transcript(out / "transcript.jsonl") as transcript:
        harness = Harness(script, [*kinds_tools(), *BUILTIN_JSON_TOOLS], transcript=transcript,
                          store=store, emit=emit, scope=SCOPE,
                          discovery=Discovery(catalog(), budget=4, emit=emit))
        harness.run_sync("Do the chores.")
    store.close()
    return refs
