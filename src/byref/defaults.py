"""Dials whose default the gateway's config reads without importing the layers that turn them.

Why a module of its own: `byref gateway` loads its config before the heavy imports (it answers
its first request from `gateway.wire.front` meanwhile), and `byref.reads`/`byref.discovery` are
packages whose doors import most of byref. Each layer re-exports its dial from here.
"""

from __future__ import annotations

from typing import Final

AUTO_INSERT_BYTES: Final = 24 * 1024
"""A result up to this many bytes is inserted into the context; above it, placed
(`byref.reads.limits`, `byref.dispatch`)."""
WORKING_SET: Final = 8
"""How many activated tools stay declared (`byref.discovery`'s `DEFAULT_BUDGET`)."""
