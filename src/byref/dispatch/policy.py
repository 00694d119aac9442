"""Dispatch settings: what a call may carry in and what its result may carry out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AUTO_INSERT_BYTES = 24 * 1024
"""Rendered results above this are placed (stored + previewed), not inserted. An operator dial."""


@dataclass(frozen=True, slots=True)
class Policy:
    refs: bool = True
    """Accept `$ref` arguments and declare them in every schema."""
    intercept_payloads: bool = True
    """Stream `Payload`s into the store and show an opaque marker."""
    placement: bool = True
    """Place structured results whose rendering exceeds `auto_insert_bytes`."""
    auto_insert_bytes: int = AUTO_INSERT_BYTES
    placed_preview_chars: int = 2_000
    max_result_chars: int | None = 400_000
    """The last-resort truncation net (None: off). With placement on it should never fire."""
    validation: Literal["enforce", "warn", "off"] = "enforce"
    """Check call input against the declared schema before anything runs."""

    @staticmethod
    def naive() -> Policy:
        """Everything inlined, nothing by reference: the baseline byref is measured against."""
        return Policy(refs=False, intercept_payloads=False, placement=False,
                      max_result_chars=None)
