"""Gateway transcripts spill: each scope's record lives in a nameless file beside a file store
(or in the temp directory), so a long session holds an index, not every call and result; closing
the scopes releases them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from byref.gateway.access.scopes import Scopes, spill_directory
from byref.gateway.config.file import parse_config
from byref.store import Scope
from byref.transcript import Part, TranscriptClosedError


def test_spill_goes_beside_a_file_store_else_to_the_temp_directory(tmp_path: Path) -> None:
    root = tmp_path / "store"
    assert spill_directory(f"file://{root}") == root and root.is_dir()
    assert spill_directory("memory://") is None
    assert spill_directory("sqlite:///x.db") is None
    assert spill_directory(None) is None


def test_memory_state_spills_beside_a_file_store_and_closing_releases_it(tmp_path: Path) -> None:
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {
        "store": f"file://{tmp_path}", "state": "memory://"}}, source="test")
    scopes = Scopes(config)
    a = scopes.state(scopes.stdio_scope).transcript
    b = scopes.state(Scope("t", "p", "gateway")).transcript
    assert a is not b and a.storage == b.storage == "state"
    assert a.origin > 0  # clock-derived: an older process's refs are refused
    a.append("user", [Part(type="text", value="hi")])
    assert a.field(a.origin, 0, None) == "hi"
    anyio.run(scopes.state(scopes.stdio_scope).persist)  # written to its spill file
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nameless files
    scopes.close()
    assert scopes.all() == []
    with pytest.raises(TranscriptClosedError):
        a.message(a.origin)


def test_beside_a_file_store_conversations_default_to_sqlite(tmp_path: Path) -> None:
    config = parse_config({"mcpServers": {"x": {"command": "true"}}, "byref": {
        "store": f"file://{tmp_path}"}}, source="test")
    scopes = Scopes(config)
    state = scopes.state(scopes.stdio_scope)
    state.transcript.append("user", [Part(type="text", value="kept")])
    anyio.run(state.persist)
    scopes.close()
    assert (tmp_path / "state.db").is_file()
