"""The harness: the agent loop over an async `Model` port, the `Session` it is built on, the
scripted model, providers, and the run's ledger.

Owns the turn-by-turn conversation with a model: `await Harness(...).run(text)` (or `run_sync`),
or your own loop around a `Session`. The law: provider types are converted at the edge; every
request is recorded exactly as sent, so what the model saw can always be audited; one turn's
tool calls run concurrently and are recorded in call order, by the session, on every path.
"""

from byref.harness.ledger import Ledger
from byref.harness.loop import REFS_PROTOCOL, Harness, RunResult, StepLimitError, render
from byref.harness.messages import (
    Block,
    ChatMessage,
    Delta,
    Model,
    OnDelta,
    Request,
    Response,
    SyncModel,
    TextDelta,
    ToolCallDelta,
    Usage,
    deltas,
)
from byref.harness.options import Hosting, Limits
from byref.harness.providers import model_from_id
from byref.harness.scripted import (
    ScriptedModel,
    ScriptExhaustedError,
    call,
    last_ref,
    last_result,
    ref_from_last_result,
    say,
)
from byref.harness.session import SYSTEM_NOTE, Provider, Session, Surface
from byref.harness.tokens import TokenCounter, count_tokens, default_counter, using_counter

__all__ = [
    "REFS_PROTOCOL",
    "SYSTEM_NOTE",
    "Block",
    "ChatMessage",
    "Delta",
    "Harness",
    "Hosting",
    "Ledger",
    "Limits",
    "Model",
    "OnDelta",
    "Provider",
    "Request",
    "Response",
    "RunResult",
    "ScriptExhaustedError",
    "ScriptedModel",
    "Session",
    "StepLimitError",
    "Surface",
    "SyncModel",
    "TextDelta",
    "TokenCounter",
    "ToolCallDelta",
    "Usage",
    "call",
    "count_tokens",
    "default_counter",
    "deltas",
    "last_ref",
    "last_result",
    "model_from_id",
    "ref_from_last_result",
    "render",
    "say",
    "using_counter",
]
