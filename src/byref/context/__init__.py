"""Request assembly: budgeted compaction of settled tool groups into exact-reread refs.

Owns what each model request carries once a byte budget is in force. The law: the question and the
latest tool group stay whole; older settled groups are replaced oldest first, and a replacement
is permanent, so the request prefix stays byte-identical between replacements; the live-handles
note (rebuilt from facts) is the varying suffix; a request that still does not fit fails with an
error naming the budget, never by shortening a current read. The harness wires it in
(`Harness(budget=…)`); this package never imports the harness.
"""

from byref.context.assembly import (
    COVERED,
    Assembled,
    ContextAssembler,
    ContextBudgetError,
    RequestBudget,
    Room,
)
from byref.context.groups import Group, apply, groups, stub, with_note
from byref.context.handles import NOTE_HEAD, live_handles_note

__all__ = [
    "COVERED", "NOTE_HEAD", "Assembled", "ContextAssembler", "ContextBudgetError", "Group",
    "RequestBudget", "Room", "apply", "groups", "live_handles_note", "stub", "with_note",
]
