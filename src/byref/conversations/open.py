"""State URLs select an implementation; an unknown scheme or option is one clear error.

    memory://                 in this process (lines spilled to nameless files: `spill=DIR`)
    sqlite:///state.db        the embedded default beside a file store
    postgresql://user@host/db shared by replicas (extra: byref[postgres])

Every URL takes `ttl` (seconds a conversation may sit idle; `ttl=0` or `ttl=none`: never
expires); the SQL ones take `table` (the tables' prefix).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from byref.conversations.port import DEFAULT_TTL, ConversationError, ConversationState

SUPPORTED = ("memory://", "sqlite:///PATH", "postgresql://…")
_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_UNSET = object()


class StateURLError(ConversationError, ValueError):
    """A state URL names no implementation or carries an option it does not take."""


def default_state_url(store: str | None) -> str:
    """The state beside the artifact store: a file store's directory holds `state.db`; any other
    store (or none) keeps conversations in memory."""
    if store is None:
        return "memory://"
    parts = urlsplit(store)
    if parts.scheme != "file":
        return "memory://"
    root = Path(parts.netloc + parts.path or ".byref")  # as open_store reads a file URL
    return f"sqlite:///{root / 'state.db'}"


def open_state(url: str, *, ttl: float | object | None = _UNSET,
               spill: bool | str | Path = False,
               clock: Callable[[], float] = time.time) -> ConversationState:
    """The implementation `url` names. `ttl` given here is the default a URL's own overrides."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    idle: float | None = DEFAULT_TTL if ttl is _UNSET else ttl  # type: ignore[assignment]
    if "ttl" in query:
        raw = query.pop("ttl")
        try:
            idle = None if raw in ("0", "none", "") else float(raw)
        except ValueError:
            raise StateURLError(f"State URL {url!r}: ttl={raw!r} must be seconds, or 0 / none "
                                "for never.") from None
        if idle is not None and idle <= 0:
            idle = None
    if parts.scheme == "memory":
        from byref.conversations.memory import MemoryConversations

        _no_more(url, query)
        return MemoryConversations(ttl=idle, spill=spill, clock=clock)
    if parts.scheme == "sqlite":
        from byref.conversations.sqlite import SqliteConversations

        table = _table(url, query)
        _no_more(url, query)
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise StateURLError(f"State URL {url!r} names no file; write sqlite:///state.db "
                                "(relative) or sqlite:////abs/state.db.")
        return SqliteConversations(path, table=table, ttl=idle, clock=clock)
    if parts.scheme in ("postgresql", "postgres"):
        from byref.conversations.postgres import PostgresConversations

        table = _table(url, query)
        conninfo = urlunsplit(parts._replace(query=urlencode(query)))
        return PostgresConversations(conninfo, table=table, ttl=idle, clock=clock)
    raise StateURLError(f"State URL {url!r} names no conversation state; use one of: "
                        f"{', '.join(SUPPORTED)}.")


def _table(url: str, query: dict[str, str]) -> str:
    table = query.pop("table", "byref")
    if not _TABLE.fullmatch(table):
        raise StateURLError(f"State URL {url!r}: table={table!r} is not a plain lower-case SQL "
                            "name; use letters, digits and underscores.")
    return table


def _no_more(url: str, query: dict[str, str]) -> None:
    if query:
        raise StateURLError(f"State URL {url!r} has options this implementation does not know: "
                            f"{', '.join(sorted(query))}; accepted: ttl, table (SQL only).")
