"""A run's verdict, read from the world state its tools kept and the refusals dispatch emitted.

`ok` when the final tool's last input is exactly what was expected; otherwise the first failure
that explains the run, in this order: the final tool ran on other values (`wrong_arguments`), a
ref could not be parsed (`malformed_ref`) or was refused (`refused_ref`), a tool outside the
task was called (`wrong_tool`), a call was refused for its input (`wrong_arguments`), the run
was stopped with none of these (`budget_exceeded`: out of steps or context), or the model
stopped without the final call (`gave_up`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from byref.eval.task import Setup
from byref.events import Event
from byref.jsonview import encode
from byref.refs import is_envelope, looks_like_ref_key, near_envelope, parse_model_envelope

Verdict = Literal["ok", "wrong_tool", "wrong_arguments", "malformed_ref", "refused_ref",
                  "gave_up", "budget_exceeded"]
VERDICTS: tuple[Verdict, ...] = ("ok", "wrong_tool", "wrong_arguments", "malformed_ref",
                                 "refused_ref", "gave_up", "budget_exceeded")
_REFS = {"bad-ref", "missing-or-expired", "kind-mismatch", "integrity", "gone"}
_INPUT = {"invalid-input", "invalid-arguments"}
_KEY = re.compile(r"art_[0-9A-Za-z]{22}")


def same(got: Any, expected: Any) -> bool:
    """Equal as JSON values, byte for byte once encoded (1 and 1.0, key order aside); for an
    object `expected`, each of its keys (the input may carry more, such as a report's title)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        got = {k: got[k] for k in expected if k in got}
    try:
        return bool(encode(_normal(got)) == encode(_normal(expected)))
    except Exception:  # a value JSON cannot carry is no match
        return False


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normal(value[k]) for k in sorted(value)}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def malformed(value: Any) -> bool:
    """Whether `value` holds a `$ref` (or a look-alike) that does not parse as one: dispatch
    says `bad-ref` both for that and for a well-formed ref to nothing."""
    if is_envelope(value):
        try:
            parse_model_envelope(value)
        except Exception:
            return True
        return False
    if near_envelope(value) is not None:
        return True
    if isinstance(value, dict):
        return any(malformed(v) for v in value.values())
    if isinstance(value, list):
        return any(malformed(v) for v in value)
    return False


def _holds_ref(value: Any) -> bool:
    if isinstance(value, dict):
        return any(looks_like_ref_key(k) for k in value) or any(map(_holds_ref, value.values()))
    if isinstance(value, list):
        return any(map(_holds_ref, value))
    return isinstance(value, str) and bool(_KEY.search(value))


def verdict(setup: Setup, events: Sequence[Event], inputs: Sequence[Any] = (), *,
            stopped: bool = False) -> Verdict:
    """The verdict on one run, from its tools' state, dispatch's `refused` events and the
    inputs of the calls the model wrote (see the module docstring for the order)."""
    if setup.settle is not None:
        setup.settle(setup)
    if setup.received:
        _, last = setup.received[-1]
        if setup.expected is None or same(last, setup.expected):
            return "ok"
    if setup.received:
        return "wrong_arguments"
    refused = [e.data for e in events if e.name == "refused"]
    reasons = [str(r.get("reason", "")) for r in refused]
    # Dispatch says `bad-ref` for some refusals of inputs that hold no ref at all (an
    # activate_tool of unknown names): only an input with a ref makes it a ref failure.
    if any(r in _REFS for r in reasons) and any(map(_holds_ref, inputs)):
        return "malformed_ref" if any(map(malformed, inputs)) else "refused_ref"
    if any(r in _REFS for r in reasons):
        return "wrong_arguments"
    if "unknown-tool" in reasons or any(n not in setup.allowed for n in setup.called):
        return "wrong_tool"
    if any(r in _INPUT for r in reasons):
        return "wrong_arguments"
    return "budget_exceeded" if stopped else "gave_up"
