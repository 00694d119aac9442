"""Dispatch: the per-call pipeline from a model's tool call to a recorded result.

Owns what crosses the context boundary at a call. The law: arguments arrive resolved and exact or
the tool does not run (a teaching refusal instead); payloads leave as opaque markers; recipes
leave as Message refs; oversized results are placed, never truncated.
"""

from byref.dispatch.pipeline import Call, Dispatcher, Refusal
from byref.dispatch.policy import Policy
from byref.reads.limits import AUTO_INSERT_BYTES

__all__ = ["AUTO_INSERT_BYTES", "Call", "Dispatcher", "Policy", "Refusal"]
