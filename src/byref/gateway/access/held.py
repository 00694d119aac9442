"""The stdio conversation's state, opened without the MCP SDK: a resumed conversation is held
before the stdio front (`wire.front`) answers anything, so an answer means it is this process's
(a second gateway on it is refused, exit 2, with nothing answered)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from byref.conversations import ConversationState, default_state_url, open_state
from byref.gateway.config.file import GatewayConfig
from byref.store import Scope

STDIO_PRINCIPAL = "stdio"


def spill_directory(store: str | None) -> Path | None:
    """Where memory state spills: beside a file store (on its disk), else the temp dir."""
    if store is None:
        return None
    parts = urlsplit(store)
    if parts.scheme != "file":
        return None
    # As `open_store` reads it: file://.byref is relative (netloc holds the first segment).
    root = Path(parts.netloc + parts.path or ".byref")
    root.mkdir(parents=True, exist_ok=True)
    return root


def open_conversations(config: GatewayConfig) -> ConversationState:
    """The config's conversation state: byref.state, else SQLite beside a file store, else
    memory (spilled beside a file store or in the temp directory)."""
    url = config.state or default_state_url(config.store)
    spill = spill_directory(config.store)
    return open_state(url, ttl=config.conversation_ttl, spill=True if spill is None else spill)


def stdio_scope(config: GatewayConfig, conversation: str) -> Scope:
    """The scope a stdio gateway on `conversation` runs in (one process is one scope)."""
    return Scope(config.scope, STDIO_PRINCIPAL, conversation)
