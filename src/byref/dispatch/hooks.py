"""What a host running sessions wires into their dispatchers, given at construction.

Owns `Hooks`. The law: every hook is optional and fixed for the dispatcher's life; a dispatcher
without one behaves as a plain library dispatcher (the usual refusal for an unknown name, no
catalog search in code mode, anyio's default thread limiter, no inner-call reports).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from byref.dispatch.nested import InnerDone, Search
from byref.dispatch.threads import Threads


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """`unknown_tool`: what to say of a name no tool has (e.g. "its server is still starting";
    None gives the usual refusal). `search`: the catalog code mode's `tools.search` ranks.
    `inner_done`: told of each call code made as it ends. `threads`: the lanes blocking stages
    run in."""

    unknown_tool: Callable[[str], str | None] | None = None
    search: Search | None = None
    inner_done: InnerDone | None = None
    threads: Threads | None = None
