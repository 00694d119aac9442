"""A toolbox build starts making its catalog's search index, so the first search_tools after a
start finds it made (or waits for that one build) instead of building it itself; direct mode,
which never searches, makes none."""

from __future__ import annotations

import threading
from typing import Any

import mcp_types as types

from byref.events import Emitter
from byref.gateway.catalog.build import build_toolbox
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.toolbox import Toolbox
from byref.gateway.config.file import parse_config
from byref.reads import ReadLimits

LISTINGS = {"tracker": [
    types.Tool(name="create_issue", description="Create an issue in a project.",
               input_schema={"type": "object", "properties": {"title": {"type": "string"}}}),
    types.Tool(name="close_issue", description="Close an issue.",
               input_schema={"type": "object", "properties": {}}),
]}


def _unreachable(*_: Any, **__: Any) -> Any:
    raise AssertionError("nothing here calls an upstream")


def _box(mode: str) -> Toolbox:
    config = parse_config({"mcpServers": {"tracker": {"command": "unused"}},
                           "byref": {"mode": mode}})
    return build_toolbox(config, 1, LISTINGS, {}, [], invoke=_unreachable, passed=Passed(),
                         usage=None, emit=Emitter(), errlog=None, read_limits=ReadLimits(),
                         call_tool=_unreachable)


def _join_index_builds() -> None:
    for thread in threading.enumerate():
        if thread.name == "byref-index":
            thread.join(30)
            assert not thread.is_alive()


def test_search_mode_makes_the_index_before_the_first_search() -> None:
    box = _box("search")
    _join_index_builds()
    made = box.catalog.built()
    assert made is not None
    assert {"create_issue", "close_issue"} <= {e.original_name for e in made.entries}
    answer = box.scaffolding[0].fn(query="open a new issue")
    assert answer["results"][0]["name"] == "tracker__create_issue"
    assert box.catalog.built() is made  # the search used the prepared index


def test_direct_mode_makes_no_index() -> None:
    box = _box("direct")
    _join_index_builds()
    assert box.catalog.built() is None
