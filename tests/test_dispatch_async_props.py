"""Property: arbitrary model input through `Dispatcher.adispatch` never raises; an async tool runs
only with the exact value its ref addresses (or the exact value written); every refusal is
bounded. The same generated input as the synchronous property (test_trust_props.py), over the
same record, driven through an event loop."""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from _tiers import examples
from _waits import scaled
from byref.dispatch import Call, Dispatcher, Policy
from byref.dispatch.pipeline import REFUSAL_MAX
from byref.jsonview import unrecordable
from byref.refs import quote
from byref.tools import tool
from byref.transcript import Part
from test_trust import text_of
from test_trust_props import RIG, _expected, _inflate, _value

RECEIVED: list[Any] = []


@tool
async def echo(x: Any) -> str:
    """Receive anything, on the event loop."""
    RECEIVED.append(x)
    return "ok"


# The synchronous rig's record, store and scope, so its known refs address the same values.
DISPATCHER = Dispatcher([echo], transcript=RIG.transcript, store=RIG.store, scope=RIG.scope,
                        emit=RIG.emit, policy=Policy(auto_insert_bytes=24_000))


async def _call(args: Any) -> Part:
    c = Call(f"a{len(RIG.transcript)}", "echo", args)
    call_seq = RIG.transcript.append("assistant", [DISPATCHER.call_part(c)]).seq
    with anyio.fail_after(scaled(10)):
        part = await DISPATCHER.adispatch(c, call_seq=call_seq, seq=call_seq + 1, part=0)
    RIG.transcript.append("tool", [part])  # raises if the part could not be recorded
    return part


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(*[st.builds(lambda v: {"x": v}, _value)] * 4, _value))
def test_adispatch_never_raises_and_delivers_only_what_is_addressed(args: Any) -> None:
    args = _inflate(args)
    RECEIVED.clear()
    part = anyio.run(_call, args)  # raises if adispatch raised
    shown = text_of(part)
    if part.is_error:
        event("refused")
        assert RECEIVED == []
        assert len(shown) < 2_000 and len(shown) <= REFUSAL_MAX
        return
    assert len(RECEIVED) == 1
    got = RECEIVED[0]
    x = args.get("x") if isinstance(args, dict) and set(args) == {"x"} else None
    if x is None and not (isinstance(args, dict) and "x" in args):
        return  # a whole-input ref that resolved to an object with x
    may_run, value = _expected(x)
    assert may_run, f"ran with {quote(got)} for {quote(x)}"
    if value is not None or x is None:
        event("ran with an exactly checked value")
        assert got == value
    assert unrecordable(got) is None or got is x
