"""Tool selection under distractors, over a real catalog of MCP tools (`shared/eval/mcp-catalog`,
read at run time, never copied here): the right tool found and called.

`direct` declares the right tool among its nearest distractors (the catalog's own top search
hits for the need); `search` declares nothing but `search_tools` / `activate_tool` over the
whole catalog. The catalog's tools are simulated: each notes its call and answers `ok`. Success
is a right tool having run (its arguments are not judged).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from byref.discovery import Catalog, Discovery
from byref.discovery.catalog.mcp import catalog_from_listings, read_listings
from byref.discovery.page.search import Searcher
from byref.errors import InvalidValue
from byref.eval.task import SELECTION_ARMS, Setup, Task
from byref.harness.messages import Block, Request, Response
from byref.harness.scripted import Step, call, last_result, say

TASKS = Path(__file__).with_name("selection_tasks.txt")
_IDS = itertools.count(1)
DECLARED = 40
"""Tools the `direct` arm declares: the right one among the catalog's nearest others."""


def default_catalog() -> Path:
    """`shared/eval/mcp-catalog` beside the repository (…/main → …/shared/eval)."""
    return Path(__file__).resolve().parents[4].parent / "shared" / "eval" / "mcp-catalog"


@functools.cache
def base_catalog(directory: Path) -> Catalog:
    """The catalog as listed (its tools unbound), read once per directory."""
    if not directory.is_dir():
        raise InvalidValue(
            f"No MCP catalog at {str(directory)!r} for the selection suite: pass --catalog DIR "
            "(a directory of tools/list JSON files) or leave the suite out (--suites).")
    return catalog_from_listings(read_listings(directory))


class _Live:
    """Whose setup the simulated catalog's calls are noted in: the run going on now."""

    setup: Setup | None = None

    def caller(self, name: str) -> Callable[..., dict[str, Any]]:
        def call(**given: Any) -> dict[str, Any]:
            if self.setup is not None:
                self.setup.note(name, given)
            return {"ok": True}

        return call


@functools.cache
def live_catalog(directory: Path) -> tuple[Catalog, _Live]:
    """The catalog with every tool simulated, built (and indexed) once per directory; each run
    points `_Live.setup` at its own setup (runs are one at a time)."""
    base, live = base_catalog(directory), _Live()
    catalog = Catalog()
    for entry in base:
        tool = dataclasses.replace(base.tool(entry.name), fn=live.caller(entry.name))
        catalog.add(tool, server=entry.server, original_name=entry.original_name)
    return catalog, live


_STRINGS = ("EXAMPLE", "example", "EX-1", "1", "2026-01-01", "https://example.com",
            "example@example.com", "a")


def placeholder(schema: dict[str, Any]) -> Any:
    """A value a schema accepts, made up (the oracle fills required arguments with these)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return placeholder(schema[key][0])
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "object":
        props = schema.get("properties", {})
        return {k: placeholder(props.get(k, {})) for k in schema.get("required", [])}
    if kind in (None, "string"):
        pattern = schema.get("pattern")
        fits = [s for s in _STRINGS if not isinstance(pattern, str) or re.search(pattern, s)]
        return fits[0] if fits else "example"
    return {"integer": 1, "number": 1, "boolean": True, "array": [],
            "null": None}.get(str(kind), "example")


def tasks(directory: Path | None = None, declared: int = DECLARED) -> list[Task]:
    """One task per need in `selection_tasks.txt` whose right tool is in the catalog."""
    directory = directory or default_catalog()
    base = base_catalog(directory)
    out: list[Task] = []
    for line in TASKS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        need, *names = line.split("\t")
        gold = [n for n in names if n in base]
        if gold:
            out.append(_task(len(out), need, gold, directory, declared))
    return out


def _task(index: int, need: str, gold: list[str], directory: Path, declared: int) -> Task:
    base = base_catalog(directory)
    prompt = (f"{need}. Find the right tool and call it; make up any argument values it "
              "requires.")
    near = [r.name for r in Searcher(base).search(need, limit=declared).results]
    shown = sorted({*gold[:1], *[n for n in near if n not in gold][:declared - 1]})

    def build(arm: str, _: Path) -> Setup:
        setup = Setup([], frozenset(gold), None, frozenset(gold))
        catalog, live = live_catalog(directory)
        live.setup = setup
        if arm == "direct":
            setup.tools = [catalog.tool(n) for n in shown]
        else:
            setup.discovery = Discovery(catalog)
            setup.allowed = setup.allowed | {t.name for t in setup.discovery.tools}
        return setup

    def oracle(arm: str) -> list[Step]:
        args = placeholder(base.tool(gold[0]).input_schema)
        if arm == "direct":
            return [call(gold[0], args), say("Done.")]

        def step(request: Request) -> Response:
            # Search with the user's words; if the page misses, once more in the tool's own
            # words (as a model that knows the API would); activate the right row, call it.
            made = [b for m in request.messages for b in m.content if b.type == "tool_use"]
            last = made[-1] if made else None
            searches = sum(b.name == "search_tools" for b in made)
            if last is None:
                return _call("search_tools", {"query": need})
            if last.name == "search_tools":
                rows = [r["name"] for r in last_result(request).get("results", [])]
                found = next((n for n in rows if n in gold), None)
                if found is not None:
                    return _call("activate_tool", {"names": [found]})
                if searches == 1:
                    words = re.sub(r"[_\-]+", " ", gold[0])
                    return _call("search_tools", {"query": words})
                return say("No tool on the page fits.")
            if last.name == "activate_tool":
                name = _activated(request, gold)
                return _call(name, placeholder(base.tool(name).input_schema))
            return say("Done.")

        return [step] * 6

    return Task("selection", f"need-{index:02d}", prompt, SELECTION_ARMS, build, oracle,
                {"catalog": len(base), "declared": len(shown)})


def _call(name: str, args: Any) -> Response:
    """One tool call as the oracle's turn."""
    return Response((Block("tool_use", id=f"oracle-{next(_IDS)}", name=name, input=args),))


def _activated(request: Request, gold: list[str]) -> str:
    """The right tool the oracle activated (the last activate_tool call's first name)."""
    for message in reversed(request.messages):
        for block in message.content:
            if block.type == "tool_use" and block.name == "activate_tool":
                names = [n for n in block.input.get("names", []) if n in gold]
                if names:
                    return str(names[0])
    return gold[0]
