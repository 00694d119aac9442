"""The conversation-state battery: every implementation, ours or a user's, runs the same laws.

Owns the single-process cases, the list of every case (`CASES`; those needing a second process
live in `conformance_processes`, the kit they share in `conformance_kit`) and a small runner. A
harness says how to make a state (`create`, with a clock the battery can move: `advance`), and
how a second process reaches the same storage (`reopen`, a picklable opener; None for state that
lives in one process, whose two-process cases are then declared with that reason). A case raises
to fail; nothing here imports a test framework.

    report = run_battery(StateBattery("mine", create=lambda: Mine(...), advance=...))
"""

from __future__ import annotations

import secrets

from byref.battery import PROCESS_TIMEOUT, CaseFailed, OffsetClock, check, equal, outcome
from byref.conversations.conformance_kit import (
    TTL,
    Case,
    Kit,
    Result,
    StateBattery,
    conflicts,
    line,
)
from byref.conversations.conformance_processes import (
    holds,
    kill_mid_write,
    numbered_writers,
    two_writers,
)
from byref.conversations.lines import ConversationTranscript
from byref.conversations.port import ConversationState, SeqConflict
from byref.refs import handle, parse_handle
from byref.store import Scope
from byref.transcript import Part, TranscriptLookupError

__all__ = ["CASES", "PROCESS_TIMEOUT", "TTL", "Case", "CaseFailed", "Kit", "Result",
           "StateBattery", "battery_for_url", "run_battery", "run_case"]


# -- the cases ----------------------------------------------------------------------------------
def round_trip(kit: Kit) -> None:
    """Lines appended are read back byte for byte under their seqs."""
    s, scope = kit.state, kit.scope()
    conv = s.open(scope, 1_000)
    equal((conv.origin, conv.length, conv.expired), (1_000, 0, None), "a new conversation")
    s.append(scope, 1_000, [line(1_000), line(1_001, 5_000)])
    s.append(scope, 1_002, [b"\x00\xff not JSON at all\n"])
    equal(s.lines(scope, 1_000, 10), [line(1_000), line(1_001, 5_000),
                                      b"\x00\xff not JSON at all\n"], "lines read back")
    equal(s.lines(scope, 1_001, 1), [line(1_001, 5_000)], "one line from the middle")
    found = s.find(scope)
    check(found is not None and found.length == 3 and found.next_seq == 1_003,
          f"find after three lines: {found!r}")
    equal(s.open(scope, 5).origin, 1_000, "origin when reopened (the given origin is ignored)")


def continues_exactly(kit: Kit) -> None:
    """An append that does not continue the record exactly is refused (SeqConflict) and writes
    nothing."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 10)
    s.append(scope, 10, [line(10)])
    for wrong in (10, 9, 12, 0):
        check(conflicts(lambda w=wrong: s.append(scope, w, [line(w)])),  # type: ignore[misc]
              f"an append at seq {wrong} (the record continues at 11) was accepted")
    equal(s.lines(scope, 10, 5), [line(10)], "lines after refused appends")
    check(conflicts(lambda: s.append(kit.scope("never-opened"), 0, [line(0)])),
          "an append to a conversation never opened was accepted")


def batch_all_or_nothing(kit: Kit) -> None:
    """A batch that fails part way leaves lines, working set and usage as they were."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 0)
    s.append(scope, 0, [line(0)], working_set=["a"], usage=[("q", "a")])
    try:
        s.append(scope, 1, [line(1), line(2), None],  # type: ignore[list-item]
                 working_set=["b"], usage=[("q2", "b")])
    except SeqConflict:
        raise
    except Exception:
        pass
    equal(s.lines(scope, 0, 10), [line(0)], "lines after a batch that failed part way")
    conv = s.find(scope)
    check(conv is not None and (conv.length, conv.working_set, conv.usage) == (1, ("a",), 1),
          f"the conversation after a failed batch: {conv!r}")
    equal(s.usage(scope), [("q", "a")], "usage after a failed batch")
    s.append(scope, 1, [line(1)])  # and it continues where it was
    equal(len(s.lines(scope, 0, 10)), 2, "lines after the next append")


def scopes_apart(kit: Kit) -> None:
    """Conversations differing only in case or in one field share nothing."""
    s = kit.state
    base = kit.scope("Conv")
    alike = [Scope(base.tenant, base.principal, "conv"), Scope(base.tenant.upper(),
             base.principal, "Conv"), Scope(base.tenant, base.principal + "/x", "Conv")]
    s.open(base, 0)
    s.append(base, 0, [line(0)], working_set=["only-here"], usage=[("q", "t")])
    for other in alike:
        equal(s.find(other), None, f"find of look-alike {other!r}")
        equal(s.lines(other, 0, 5), [], f"lines of look-alike {other!r}")
        equal(s.usage(other), [], f"usage of look-alike {other!r}")
        conv = s.open(other, 50)
        equal((conv.origin, conv.length, conv.working_set), (50, 0, ()), "look-alike opened")
    equal(s.lines(base, 0, 5), [line(0)], "the original's lines")


def saved_with_the_record(kit: Kit) -> None:
    """The working set and usage evidence are kept with the record and come back when it is opened
    again."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 7)
    s.append(scope, 7, [line(7)], working_set=["x", "y"], usage=[("find x", "x")])
    s.append(scope, 8, [line(8)])  # no working set given: the saved one stays
    s.append(scope, 9, [], usage=[("find y", "y"), ("find y again", "y")])
    conv = s.open(scope, 0)
    equal((conv.length, conv.working_set, conv.usage), (2, ("x", "y"), 3), "resumed state")
    equal(s.usage(scope), [("find x", "x"), ("find y", "y"), ("find y again", "y")], "usage")
    s.append(scope, 9, [line(9)], working_set=[])
    equal(s.find(scope).working_set, (), "an emptied working set")  # type: ignore[union-attr]


def seen_by_another_instance(kit: Kit) -> None:
    """A second instance over the same storage sees the record and cannot continue it from a stale
    seq."""
    other = kit.opener()()
    try:
        s, scope = kit.state, kit.scope()
        s.open(scope, 3)
        s.append(scope, 3, [line(3)], working_set=["w"], usage=[("q", "w")])
        conv = other.open(scope, 99)
        equal((conv.origin, conv.length, conv.working_set), (3, 1, ("w",)), "from another open")
        other.append(scope, 4, [line(4)])
        check(conflicts(lambda: s.append(scope, 4, [line(4)])),
              "two instances both continued the record at seq 4")
        equal(s.lines(scope, 3, 5), [line(3), line(4)], "lines seen by the first instance")
    finally:
        other.close()


def expiry(kit: Kit) -> None:
    """A conversation idle past its ttl is gone; its seq range is remembered and a new record
    begins after it; a touch restarts the idle time."""
    s, scope, keep = kit.state, kit.scope(), kit.scope("kept")
    s.open(scope, 100)
    s.open(keep, 0)
    s.append(scope, 100, [line(100), line(101)], working_set=["t"], usage=[("q", "t")])
    kit.advance(TTL * 0.6)
    s.append(keep, 0, [line(0)])  # touched: its idle time starts again
    kit.advance(TTL * 0.6)
    equal(s.find(scope), None, "find of a conversation idle past its ttl")
    equal(s.lines(scope, 100, 5), [], "lines of an expired conversation")
    equal(s.usage(scope), [], "usage of an expired conversation")
    check(conflicts(lambda: s.append(scope, 102, [line(102)])),
          "an append to an expired conversation was accepted")
    check(s.find(keep) is not None, "a conversation touched within its ttl expired")
    conv = s.open(scope, 50)
    equal((conv.expired, conv.length, conv.working_set), ((100, 101), 0, ()),
          "reopened after expiry")
    check(conv.origin > 101, f"a new record begins after the expired range, got {conv.origin}")
    s.append(scope, conv.origin, [line(conv.origin)])
    kit.advance(TTL * 1.1)
    again = s.open(scope, 0)
    check(again.expired is not None and again.expired[0] == 100
          and again.expired[1] == conv.origin, f"expired ranges accumulate: {again.expired!r}")


def sweep(kit: Kit) -> None:
    """sweep expires idle conversations and only those."""
    s = kit.state
    old, fresh = kit.scope("old"), kit.scope("fresh")
    s.open(old, 0)
    s.append(old, 0, [line(0)])
    kit.advance(TTL * 0.7)
    s.open(fresh, 0)
    kit.advance(TTL * 0.7)
    check(s.sweep() >= 1, "sweep expired nothing")
    equal(s.find(old), None, "a swept conversation")
    check(s.find(fresh) is not None, "sweep took a conversation within its ttl")
    equal(s.open(old, 0).expired, (0, 0), "a swept conversation's range is remembered")


def delete(kit: Kit) -> None:
    """delete forgets a conversation entirely."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 20)
    s.append(scope, 20, [line(20)], usage=[("q", "t")])
    equal(s.delete(scope), True, "delete of a conversation")
    equal(s.delete(scope), False, "a second delete")
    equal((s.find(scope), s.lines(scope, 20, 1), s.usage(scope)), (None, [], []),
          "a deleted conversation")
    conv = s.open(scope, 5)
    equal((conv.origin, conv.expired), (5, None), "opened again after delete")


def listed(kit: Kit) -> None:
    """The live conversations are listed by exact tenant and principal; expired ones are not."""
    s = kit.state
    a, b = kit.scope("a"), kit.scope("b")
    other = Scope(a.tenant, a.principal + "x", "a")
    lower = Scope(a.tenant.upper(), a.principal, "a")
    for n, scope in enumerate((b, a, other, lower)):
        s.open(scope, 10 * n)
        s.append(scope, 10 * n, [line(10 * n)])
    mine = s.conversations(a.tenant, a.principal)
    equal([(c.scope, c.origin, c.length) for c in mine], [(a, 10, 1), (b, 0, 1)],
          "a principal's conversations")
    equal({c.scope for c in s.conversations(a.tenant)}, {a, b, other}, "a tenant's")
    equal({a, b, other, lower} <= {c.scope for c in s.conversations()}, True, "every tenant's")
    kit.advance(TTL + 1)
    equal(s.conversations(a.tenant), [], "a tenant's conversations once expired")


def bounds(kit: Kit) -> None:
    """Reads outside the record answer fewer or no lines, never others'."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 10)
    s.append(scope, 10, [line(10), line(11), line(12)])
    equal(s.lines(scope, 12, 100), [line(12)], "lines past the end")
    equal(s.lines(scope, 13, 5), [], "lines beyond the end")
    equal(s.lines(scope, 10, 0), [], "zero lines")
    equal(s.lines(scope, 5, 3), [], "lines before the origin")
    equal(s.lines(scope, 9, 3), [], "lines from just before the origin (never shifted)")


# -- two processes ------------------------------------------------------------------------------
def numbered(kit: Kit) -> None:
    """`append_numbered` lands at the record's next seq with that seq written into the line;
    `save` keeps the working set and usage at any length; both are refused once the record is
    gone, writing nothing."""
    s, scope = kit.state, kit.scope()
    s.open(scope, 500)
    equal(s.append_numbered(scope, b"<", b">\n"), 500, "the first numbered seq")
    s.append(scope, 501, [line(501)])
    equal(s.append_numbered(scope, b"", b""), 502, "numbered after a conditional append")
    equal(s.lines(scope, 500, 10), [b"<500>\n", line(501), b"502"], "numbered lines read back")
    s.save(scope, working_set=["a", "b"], usage=[("q", "t")])
    s.save(scope, usage=[("q2", "t2")])
    conv = s.find(scope)
    check(conv is not None and (conv.length, conv.working_set, conv.usage) == (3, ("a", "b"), 2),
          f"saved beside three lines: {conv!r}")
    equal(s.usage(scope), [("q", "t"), ("q2", "t2")], "usage saved without lines")
    check(conflicts(lambda: s.append(scope, 502, [line(502)])), "a stale seq after numbering")
    kit.advance(TTL + 1)
    check(conflicts(lambda: s.append_numbered(scope, b"", b"")), "numbered into an expired "
          "record")
    check(conflicts(lambda: s.save(scope, working_set=["c"])), "save into an expired record")
    equal(s.open(scope, 0).origin, 503, "a new record after the expired one")


def handles(kit: Kit) -> None:
    """A result's handle (its seq's last nine digits) names the same message when the record is
    opened again; one into a record that expired names nothing of the record after it."""
    s, scope = kit.state, kit.scope()
    origin = 29_999_999_998  # a gateway's seqs are this long; its handles cross a 10^9 boundary
    first = ConversationTranscript(s, s.open(scope, origin))
    for i in range(4):
        first.append("tool", [Part(type="tool_result", value=f"result {i}")])
    first.lines.flush()
    shown = [handle(origin + i) for i in range(4)]
    equal(shown[1:3], ["r999999999", "r0"], "handles across the boundary")
    again = ConversationTranscript(s, s.open(scope, 0))
    for i, written in enumerate(shown):
        at = parse_handle(written).at(again.next_seq - 1)
        equal(at.seq, origin + i, f"the seq {written!r} names when opened again")
        assert at.seq is not None
        equal(again.part(at.seq, 0).value, f"result {i}", f"the message {written!r} names")
    kit.advance(TTL + 1)
    after = ConversationTranscript(s, s.open(scope, 0))
    after.append("tool", [Part(type="tool_result", value="newer")])
    after.lines.flush()
    at = parse_handle(shown[0]).at(after.next_seq - 1)
    check(at.seq == origin, f"an expired record's handle read as seq {at.seq}, not {origin}")
    assert at.seq is not None
    try:
        got = after.part(at.seq, 0).value
    except TranscriptLookupError:
        return
    raise CaseFailed(f"a handle into the expired record answered {got!r}")


CASES: tuple[Case, ...] = (
    Case("round-trip", "Lines appended are read back byte for byte under their seqs.",
         round_trip),
    Case("continues-exactly", "An append that does not continue the record exactly is refused "
         "(SeqConflict) and writes nothing.", continues_exactly),
    Case("batch-all-or-nothing", "A batch that fails part way leaves lines, working set and "
         "usage as they were.", batch_all_or_nothing),
    Case("scopes-apart", "Conversations differing only in case or in one field share nothing.",
         scopes_apart),
    Case("saved-with-the-record", "The working set and usage evidence are kept with the "
         "record and come back when it is opened again.", saved_with_the_record),
    Case("expiry", "A conversation idle past its ttl is gone; its seq range is remembered and a "
         "new record begins after it; a touch restarts the idle time.", expiry),
    Case("sweep", "sweep expires idle conversations and only those.", sweep),
    Case("delete", "delete forgets a conversation entirely.", delete),
    Case("bounds", "Reads outside the record answer fewer or no lines, never others'.", bounds),
    Case("listed", "The live conversations are listed by exact tenant and principal; expired "
         "ones are not.", listed),
    Case("seen-by-another-instance", "A second instance over the same storage sees the record "
         "and cannot continue it from a stale seq.", seen_by_another_instance, True),
    Case("two-writers-two-processes", "Two processes continuing one record lose nothing and "
         "mix nothing up (the loser of a race retries).", two_writers, True),
    Case("numbered", "A numbered append lands at the next seq, written into its line; save "
         "keeps working set and usage at any length; both refused once the record is gone.",
         numbered),
    Case("numbered-writers-two-processes", "Two processes appending numbered lines at once: "
         "each lands at the seq it was told, none twice, none skipped.", numbered_writers, True),
    Case("holds", "A held conversation is refused to any other holder; free once released or "
         "its holder is killed with SIGKILL.", holds, True),
    Case("kill-mid-write", "A writer killed with SIGKILL mid-write leaves whole batches only; "
         "nothing torn is ever read back, and the record continues.", kill_mid_write, True),
    Case("handles", "A result's handle names the same message when the record is opened again; "
         "one into an expired record names nothing of the record after it.", handles),
)


def run_case(case: Case, harness: StateBattery) -> Result:
    """Run one case on a fresh state of the harness (closed after); its Result, `declared` when it
    failed for a reason the harness gave."""
    state = harness.create()
    try:
        kit = Kit(state, secrets.token_hex(6), lambda s: harness.advance(state, s),
                  None if harness.reopen is None else harness.reopen(state))
        try:
            case.run(kit)
        except Exception as exc:
            error: str | None = f"{type(exc).__name__}: {exc}"
        else:
            error = None
    finally:
        state.close()
    got, detail = outcome(error, harness.declared.get(case.name))
    return Result(case.name, case.law, got, detail)


def run_battery(harness: StateBattery) -> list[Result]:
    """Every case of the battery on the harness, in order."""
    return [run_case(case, harness) for case in CASES]


def battery_for_url(url: str) -> StateBattery:
    """A harness for any URL `open_state` understands (ttl=TTL, a clock the battery moves)."""
    import functools

    from byref.conversations.open import open_state

    clocks: dict[int, OffsetClock] = {}

    def create() -> ConversationState:
        clock = OffsetClock()
        state = open_state(url, ttl=TTL, clock=clock)
        clocks[id(state)] = clock
        return state

    def advance(state: ConversationState, seconds: float) -> None:
        clocks[id(state)].offset += seconds

    memory = url.startswith("memory:")
    reason = "memory state lives in one process; no other instance or process can reach it"
    return StateBattery(
        name=url, create=create, advance=advance,
        reopen=None if memory else (lambda state: functools.partial(open_state, url, ttl=TTL)),
        declared={c.name: reason for c in CASES if c.processes} if memory else {})
