"""The gateway's SDK bypasses, listed once, and the one switch that turns them all off.

Owns `LANES` (every path that answers without the SDK's request machinery, on either edge) and
the switch: `byref gateway --sdk-paths-only`, or `BYREF_SDK_PATHS_ONLY=1` in the environment (how
CI runs the protocol tests a second time through the SDK alone). The law: with the switch on, or
for a lane whose SDK internals this release lacks (`sdk_server.lane_gaps`, named in one operator
line at start), every request is served by the SDK.
"""

from __future__ import annotations

import logging
import os

LANES: dict[str, str] = {
    "raw_calls": "plain tools/call requests written straight to a stdio upstream's pipes "
                 "(upstream/instance/raw_calls.py)",
    "fastpath": "a plain tools/call answered as wire JSON inside the SDK's loop "
                "(edge/lanes/fastpath.py)",
    "stdio": "plain calls taken off byref's own stdio streams before the SDK's loop "
             "(edge/lanes/stdio.py)",
    "http": "plain 2026-07-28 calls answered at the HTTP app's edge after the bearer check "
            "(edge/lanes/http.py)",
    "front": "a stdio client's first initialize, ping or server/discover answered before the "
             "SDK is imported, from the full gateway's recorded answers (wire/front.py)",
}
"""Every bypass, by name: the switch turns all of them off."""

SDK_PATHS_ONLY_ENV = "BYREF_SDK_PATHS_ONLY"

log = logging.getLogger("byref.gateway.lanes")
_reported: set[str] = set()


def lanes_on(requested: bool = True) -> bool:
    """Whether the lanes run: asked for, and not switched off in the environment."""
    return requested and os.environ.get(SDK_PATHS_ONLY_ENV, "").strip().lower() not in (
        "1", "true", "yes", "on")


def lane_usable(name: str) -> bool:
    """Whether this SDK release has what lane `name` needs; if not, say so once (operator)."""
    from byref.gateway.wire.sdk_server import lane_gaps  # here: `front` reads this module first

    gap = lane_gaps().get(name)
    if gap is None:
        return True
    if name not in _reported:
        _reported.add(name)
        log.warning("byref gateway: the %s lane is off: this mcp SDK release lacks %s; "
                    "those requests are served through the SDK", name, gap)
    return False
