"""Conversation state: one conversation's transcript lines, working set and usage evidence, behind
a port with memory, SQLite (the embedded default) and PostgreSQL implementations.

Layer: above `byref.transcript` and `byref.store` (it uses `Scope` as a conversation's key), below
`byref.gateway`, which writes every call and result through it. The law (`port`): appends only
continue a record, whole or not at all, and a line once acknowledged is read back byte for byte
under its seq by any process; conversations are apart by exact scope; an idle conversation
expires and a ref into it is told so. `byref.conversations.conformance` is the one battery every
implementation runs. SQL implementations are imported from their modules (or opened by URL), so
psycopg loads only when used.
"""

from byref.conversations.lines import ConversationLines, ConversationTranscript
from byref.conversations.memory import MemoryConversations
from byref.conversations.open import StateURLError, default_state_url, open_state
from byref.conversations.port import (
    DEFAULT_TTL,
    SHARED_CONVERSATION,
    Conversation,
    ConversationBusy,
    ConversationError,
    ConversationState,
    SeqConflict,
)

__all__ = [
    "DEFAULT_TTL",
    "SHARED_CONVERSATION",
    "Conversation",
    "ConversationBusy",
    "ConversationError",
    "ConversationLines",
    "ConversationState",
    "ConversationTranscript",
    "MemoryConversations",
    "SeqConflict",
    "StateURLError",
    "default_state_url",
    "open_state",
]
