"""The harness: the agent loop over a `Model` port, the scripted model, and the run's ledger.

Owns the turn-by-turn conversation with a model. The law: provider types are converted at the
edge; every request is recorded exactly as sent, so what the model saw can always be audited.
"""

from byref.harness.ledger import Ledger
from byref.harness.loop import REFS_PROTOCOL, Harness, RunResult, StepLimitError, render
from byref.harness.messages import Block, ChatMessage, Model, Request, Response, Usage
from byref.harness.providers import model_from_id
from byref.harness.scripted import (
    ScriptedModel,
    ScriptExhaustedError,
    call,
    last_result,
    ref_from_last_result,
    say,
)
from byref.harness.session import SYSTEM_NOTE, Session
from byref.harness.tokens import TokenCounter, count_tokens, default_counter, using_counter

__all__ = [
    "REFS_PROTOCOL",
    "SYSTEM_NOTE",
    "Block",
    "ChatMessage",
    "Harness",
    "Ledger",
    "Model",
    "Request",
    "Response",
    "RunResult",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Session",
    "StepLimitError",
    "TokenCounter",
    "Usage",
    "call",
    "count_tokens",
    "default_counter",
    "last_result",
    "model_from_id",
    "ref_from_last_result",
    "render",
    "say",
    "using_counter",
]
