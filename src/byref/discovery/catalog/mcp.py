"""Loading MCP `tools/list` answers into a catalog.

The law: a listing is a JSON file holding a list of tools or an object with `tools` (and
optionally `server`), or a directory of such files (the server is the file's `server` field,
else its stem). Each tool becomes a `Tool` whose schema is the server's verbatim (an empty or
untyped schema is read as an object with no declared properties) and whose capabilities are
derived: `<server>:<access>`, where access is delete when the tool name starts with a verb of
removal, else comes from the MCP annotations (`readOnlyHint` → read, other annotated tools →
write: `destructiveHint` says a tool may overwrite, as `write_file` does, not that it deletes)
or, without annotations, from the verb the tool name starts with. Names repeated across
servers are qualified `<server>__<name>`; a malformed listing fails with a message naming the
file and the tool.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from byref.discovery.catalog.catalog import Catalog
from byref.discovery.catalog.ontology import Ontology
from byref.errors import MisuseError, OperatorError
from byref.tools import Tool


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


_READ = _wordset(
    "get list read search find query describe fetch show view count check lookup browse "
    "download export inspect explain retrieve scan analyze analyse preview estimate compare "
    "calculate validate verify watch monitor test diff status summarize summarise"
)
_DELETE = _wordset("delete remove drop destroy purge terminate revoke deregister")
_SLUG = re.compile(r"[^a-z0-9]+")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class ListingError(OperatorError, ValueError):
    """A tools/list file does not have the expected shape (the text says where)."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One tool as a server lists it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: Mapping[str, Any]


def safe_name(name: str) -> str:
    """A provider-safe tool name: characters other than letters, digits, '_' and '-' → '_'."""
    return _UNSAFE.sub("_", name) or "tool"


def server_slug(server: str) -> str:
    """A server name as a tool-name prefix: lower case, other runs of characters → '-'."""
    return _SLUG.sub("-", server.lower()).strip("-") or "server"


def access_of(name: str, annotations: Mapping[str, Any]) -> str:
    """read / write / delete: delete by the name's leading verb, else read or write from the
    MCP annotations, else from that verb."""
    words = re.findall(r"[a-z]+|[A-Z][a-z]*", name)
    verb = words[0].lower() if words else ""
    if annotations.get("readOnlyHint") is True:
        return "read"
    if verb in _DELETE:
        return "delete"
    if any(k.endswith("Hint") for k in annotations):
        return "write"  # destructiveHint too: "may overwrite", not "deletes"
    return "read" if verb in _READ else "write"


def parse_listing(raw: Any, *, server: str, where: str) -> list[Listed]:
    """A decoded tools/list answer (a list of tools, or an object with `tools`) → tools."""
    if isinstance(raw, dict):
        server = str(raw.get("server") or server)
        tools = raw.get("tools")
        if not isinstance(tools, list):
            raise ListingError(f"{where}: expected a 'tools' list, got {type(tools).__name__!r}.")
    elif isinstance(raw, list):
        tools = raw
    else:
        raise ListingError(
            f"{where}: expected a list of tools or an object with 'tools', got "
            f"{type(raw).__name__!r}."
        )
    out = []
    for i, item in enumerate(tools):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ListingError(f"{where}: tool #{i} has no 'name' string.")
        schema = item.get("inputSchema", item.get("input_schema"))
        if schema is None:
            schema = {}
        if not isinstance(schema, dict):
            raise ListingError(f"{where}: tool {item['name']!r} has a non-object inputSchema.")
        schema = {"type": "object", "properties": {}, **schema}  # a copy; empty ones filled in
        annotations = item.get("annotations") or {}
        description = item.get("description") or ""
        if not isinstance(description, str) or not isinstance(annotations, dict):
            raise ListingError(f"{where}: tool {item['name']!r} has a malformed description "
                               "or annotations.")
        out.append(Listed(server, item["name"], description, schema, annotations))
    return out


def read_listings(path: str | Path) -> list[Listed]:
    """Every tool in a tools/list file or a directory of them (files in name order)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise ListingError(f"{str(path)!r} holds no .json tools/list files.")
    elif path.is_file():
        files = [path]
    else:
        raise ListingError(f"{str(path)!r} is neither a tools/list JSON file nor a directory.")
    out: list[Listed] = []
    for file in files:
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ListingError(f"{str(file)!r} is not readable JSON: {exc}") from exc
        out.extend(parse_listing(raw, server=file.stem, where=repr(str(file))))
    return out


def _unbound(server: str, name: str) -> Any:
    def call(**_: Any) -> Any:
        raise MisuseError(
            f"Tool {name!r} of server {server!r} was loaded from a listing and is not connected "
            "to its server; run it through the gateway."
        )

    return call


def catalog_from_listings(
    listed: Iterable[Listed], *, ontology: Ontology | None = None
) -> Catalog:
    """A catalog of listed tools; names occurring on several servers become `server__name`."""
    items = list(listed)
    counts = Counter(t.name for t in items)
    catalog = Catalog(ontology=ontology)
    for t in items:
        root = server_slug(t.server)
        name = safe_name(t.name if counts[t.name] == 1 else f"{root}__{t.name}")
        if name in catalog:  # the same name twice on one server: keep the first, as MCP does
            continue
        tool = Tool(
            name=name, description=t.description, fn=_unbound(t.server, t.name),
            input_schema=t.input_schema,
            capabilities=(f"{root}:{access_of(t.name, t.annotations)}",),
        )
        catalog.add(tool, server=t.server, original_name=t.name)
    return catalog


def load_catalog(path: str | Path, *, ontology: Ontology | None = None) -> Catalog:
    """`load_catalog("servers/")`: a catalog from a tools/list file or a directory of them."""
    return catalog_from_listings(read_listings(path), ontology=ontology)
