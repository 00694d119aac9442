"""Dispatch settings: what a call may carry in and what its result may carry out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from byref.reads.limits import AUTO_INSERT_BYTES, EXPLICIT_READ_BYTES, ReadLimits

EXPLICIT_READ_FRAME = 16 * 1024
"""Room above the explicit-read limit for a read's own frame (coverage, source, note)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """How dispatch treats refs and results: ref arguments, payload interception, placement and
    its byte limits, the result ceiling, and schema validation."""
    refs: bool = True
    """Accept `$ref` arguments and declare them in every schema."""
    intercept_payloads: bool = True
    """Stream `Payload`s into the store and show an opaque marker."""
    placement: bool = True
    """Place structured results whose rendering exceeds `auto_insert_bytes`."""
    auto_insert_bytes: int = AUTO_INSERT_BYTES
    """Rendered results above this are placed (stored + previewed), not inserted."""
    explicit_read_bytes: int = EXPLICIT_READ_BYTES + EXPLICIT_READ_FRAME
    """Placement threshold for explicit reads (tools marked `explicit_read`): they bound
    themselves, so the automatic-insertion limit must not turn their answer into a preview."""
    placed_preview_chars: int = 2_000
    max_result_chars: int | None = 400_000
    """The last-resort truncation net (None: off). With placement on it should never fire."""
    validation: Literal["enforce", "warn", "off"] = "enforce"
    """Check call input against the declared schema before anything runs."""

    def read_limits(self, *, explicit_read_bytes: int = EXPLICIT_READ_BYTES) -> ReadLimits:
        """The read limits that go with this policy: one automatic-insertion dial, so reads see
        the value placement uses. Every surface (gateway, loop, session, bridge) asks here."""
        return ReadLimits(auto_insert_bytes=self.auto_insert_bytes,
                          explicit_read_bytes=explicit_read_bytes)

    @staticmethod
    def naive() -> Policy:
        """Everything inlined, nothing by reference: the baseline byref is measured against."""
        return Policy(refs=False, intercept_payloads=False, placement=False,
                      max_result_chars=None)
