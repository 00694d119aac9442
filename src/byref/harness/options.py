"""The grouped options of `Harness` and `Session`: how far a run may go, and what a host wires in.

Owns `Limits` and `Hosting`, grouped as httpx's `Limits`/`Timeout` and pydantic-ai's settings
objects group theirs, so the constructors keep to the dials most callers set.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from byref.context import RequestBudget
from byref.dispatch.hooks import Hooks
from byref.reads import ReadLimits
from byref.resolve import Caps
from byref.tools import Tool


class AsyncLock(Protocol):
    """The lock a session records exclusive calls under (`asyncio.Lock`, `anyio.Lock`)."""

    def locked(self) -> bool:
        """True while some task holds it."""
        ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any, /) -> Any: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """`max_steps`: model turns before `StepLimitError` (the loop's). `budget`: the request size
    context assembly keeps to (`byref.context`; the loop's). `caps`: how much resolving refs may
    read. `read_limits`: the read tools' limits (default: the policy's)."""

    max_steps: int = 32
    budget: RequestBudget | int | None = None
    caps: Caps | None = None
    read_limits: ReadLimits | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hosting:
    """For a program hosting many sessions over shared records (the gateway). `readers`: the
    built-in read tools to offer (default: `builtin_tools()` whenever a result can be stored;
    `()` when the host's catalog has them). `lock`: the lock exclusive calls record under,
    shared with whoever else writes the transcript. `hooks`: wired into the dispatcher."""

    readers: Sequence[Tool] | None = None
    lock: AsyncLock | None = None
    hooks: Hooks = field(default_factory=Hooks)


INSTEAD = {
    "max_steps": "limits=Limits(max_steps=...)", "budget": "limits=Limits(budget=...)",
    "caps": "limits=Limits(caps=...)", "read_limits": "limits=Limits(read_limits=...)",
    "readers": "hosting=Hosting(readers=...)", "lock": "hosting=Hosting(lock=...)",
    "unknown_tool": "hosting=Hosting(hooks=Hooks(unknown_tool=...))",
}
"""Each flat keyword of the last release and where it went."""


def legacy(owner: str, given: dict[str, Any]) -> dict[str, Any]:
    """The flat keywords of the last release a caller still passes (not None), each warned of."""
    passed = {k: v for k, v in given.items() if v is not None}
    for name in passed:
        warnings.warn(f"{owner}({name}=...) is deprecated and goes in the next release; pass "
                      f"{INSTEAD[name]} instead.", DeprecationWarning, stacklevel=3)
    return passed
