"""Loading tools/list files and directories into a catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from byref.discovery import ListingError, load_catalog
from byref.discovery.catalog.mcp import access_of


def write(path: Path, raw: object) -> Path:
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_directory_servers_collisions_and_capabilities(tmp_path: Path) -> None:
    write(tmp_path / "gh.json", {"server": "GitHub", "tools": [
        {"name": "create_issue", "description": "Create an issue", "inputSchema": {}},
        {"name": "search", "description": "Search code",
         "annotations": {"readOnlyHint": True}},
    ]})
    write(tmp_path / "jira.json", [
        {"name": "search", "description": "Search issues"},
        {"name": "delete_issue", "description": "Delete an issue"},
        {"name": "odd.name", "description": "Dots are not allowed by providers"},
    ])
    (tmp_path / "notes.txt").write_text("ignored")
    catalog = load_catalog(tmp_path)
    assert catalog.names == ["create_issue", "github__search", "jira__search", "delete_issue",
                             "odd_name"]
    entry = catalog.entry("github__search")
    assert (entry.server, entry.original_name, entry.capabilities) == (
        "GitHub", "search", ("github:read",))
    assert catalog.entry("create_issue").capabilities == ("github:write",)
    assert catalog.entry("delete_issue").capabilities == ("jira:delete",)
    assert catalog.entry("odd_name").original_name == "odd.name"
    assert catalog.capability_roots() == ["github", "jira"]
    assert catalog.tool("create_issue").declaration()["input_schema"]["type"] == "object"


def test_access_from_annotations_then_name() -> None:
    # Issue 39.D: destructiveHint says a tool may overwrite, not that it deletes; the
    # filesystem server's write_file (its annotations verbatim) was labelled delete.
    write_file = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
                  "openWorldHint": False}
    assert access_of("write_file", write_file) == "write"
    assert access_of("anything", {"destructiveHint": True}) == "write"
    assert access_of("delete_branch", {"destructiveHint": True}) == "delete"
    assert access_of("deleteBranch", {"destructiveHint": False}) == "delete"
    assert access_of("delete_preview", {"readOnlyHint": True}) == "read"
    assert access_of("list_things", {"idempotentHint": True}) == "write"
    assert access_of("listThings", {}) == "read"
    assert access_of("remove_user", {}) == "delete"


def test_unreadable_and_missing_paths(tmp_path: Path) -> None:
    with pytest.raises(ListingError, match="is neither a tools/list JSON file nor a directory"):
        load_catalog(tmp_path / "missing.json")
    with pytest.raises(ListingError, match=r"holds no \.json tools/list files"):
        load_catalog(tmp_path)
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(ListingError, match=r"bad\.json' is not readable JSON"):
        load_catalog(tmp_path)


def test_unknown_name_lookup_suggests(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path / "s.json", [{"name": "read_pdf"}]))
    with pytest.raises(KeyError, match=r"did you mean 'read_pdf'\?"):
        catalog.entry("raed_pdf")
