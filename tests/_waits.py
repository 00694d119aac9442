"""How long a test waits for something that should happen, scaled to the machine it runs on.

Every bound a test puts on a wait (`anyio.fail_after`, a subprocess's `timeout=`, an upstream's
handshake and call `timeout` in a gateway config) is written as `scaled(seconds)`: the seconds it
takes on an idle developer machine, times one factor for the whole run. A loaded 2-core machine
(or a CI runner) then waits longer instead of failing; a test that passes never waits more than it
did, since these are deadlines, not sleeps.

The factor, `SCALE`:

- `BYREF_TEST_WAIT_SCALE` when set (a number ≥ 1; e.g. `BYREF_TEST_WAIT_SCALE=10 make test`);
- otherwise 6 under CI (`CI` set, as GitHub Actions and most runners do) or on a busy machine
  (a one-minute load average at or above its number of cores);
- otherwise 2: a developer's machine is rarely as idle as the one the bound was measured on.

A wait that is itself what a test checks (a 1 s call timeout that must fire, a 0.2 s grace) is a
plain number, not scaled: scaling it would change what is tested.
"""

from __future__ import annotations

import os


def _scale() -> float:
    said = os.environ.get("BYREF_TEST_WAIT_SCALE", "").strip()
    if said:
        try:
            value = float(said)
        except ValueError:
            raise ValueError(f"BYREF_TEST_WAIT_SCALE must be a number ≥ 1, got {said!r}") from None
        if value < 1:
            raise ValueError(f"BYREF_TEST_WAIT_SCALE must be a number ≥ 1, got {said!r}")
        return value
    if os.environ.get("CI"):
        return 6.0
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        busy = False
    return 6.0 if busy else 2.0


SCALE = _scale()
"""The factor every `scaled` wait is multiplied by in this run (see the module's docstring)."""


def scaled(seconds: float) -> float:
    """`seconds` (a bound measured on an idle machine) for this machine: `seconds * SCALE`."""
    return seconds * SCALE
