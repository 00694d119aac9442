"""Retention: ttl, and byte / count ceilings per scope. Configuration of an adapter, not a verb.

The law: a put that would cross a ceiling evicts the scope's oldest artifacts first and reports
each eviction (in the put's answer and as an event); a single payload larger than the byte ceiling
is refused before anything is written, never half-kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from byref.errors import InvalidValue
from byref.store.port import ArtifactMeta, ArtifactTooLargeError


@dataclass(frozen=True, slots=True)
class Retention:
    """How long artifacts live and how much a scope may hold; a put that would overflow evicts
    the oldest first."""
    ttl: float | None = None
    """Default seconds an artifact lives (a put may ask for less or more)."""
    max_bytes_per_scope: int | None = None
    max_count_per_scope: int | None = None

    @property
    def bounded(self) -> bool:
        """Whether a put must look at what the scope already holds (a ceiling is set)."""
        return self.max_bytes_per_scope is not None or self.max_count_per_scope is not None

    def __post_init__(self) -> None:
        for name in ("ttl", "max_bytes_per_scope", "max_count_per_scope"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InvalidValue(f"Retention.{name} must be positive, got {value!r}")


def expiry(now: float, requested_ttl: float | None, retention: Retention) -> float | None:
    """When an artifact put at `now` expires: the put's own ttl, else the retention's; None for
    never."""
    ttl = requested_ttl if requested_ttl is not None else retention.ttl
    return None if ttl is None else now + ttl


def is_expired(meta: ArtifactMeta, now: float) -> bool:
    """Whether `meta` has expired at `now`."""
    return meta.expires_at is not None and meta.expires_at <= now


def refuse_oversize(incoming_bytes: int, retention: Retention) -> None:
    """Raise before any byte is written when one payload can never fit the scope's ceiling."""
    cap = retention.max_bytes_per_scope
    if cap is not None and incoming_bytes > cap:
        raise ArtifactTooLargeError(
            f"A payload of {incoming_bytes:,} bytes exceeds this scope's ceiling of "
            f"{cap:,} bytes; raise Retention.max_bytes_per_scope or store it elsewhere."
        )


def plan_evictions(
    live: Sequence[ArtifactMeta], incoming_bytes: int, retention: Retention
) -> list[str]:
    """Refs to evict (oldest first) so one more payload of `incoming_bytes` fits the ceilings."""
    refuse_oversize(incoming_bytes, retention)
    cap_bytes, cap_count = retention.max_bytes_per_scope, retention.max_count_per_scope
    ordered = sorted(live, key=lambda m: (m.created_at, m.ref))
    total = sum(m.bytes for m in ordered)
    count = len(ordered)
    evict: list[str] = []
    for meta in ordered:
        over_bytes = cap_bytes is not None and total + incoming_bytes > cap_bytes
        over_count = cap_count is not None and count + 1 > cap_count
        if not (over_bytes or over_count):
            break
        evict.append(meta.ref)
        total -= meta.bytes
        count -= 1
    return evict
