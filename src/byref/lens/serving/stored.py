"""The lens over what a store holds: every conversation a conversation-state store keeps, with
the artifacts its artifact store minted for them (a gateway's `--store`, its state beside it).

Owns `conversation_run` (one stored conversation as a `Run`: its lines copied into memory, its
artifacts through a `ReadOnlyStore` bound to that conversation's scope) and `StoreLens`, the
pages of a whole store: `/` lists the live conversations, `/c/<tenant>/<principal>/<id>/` is
one conversation's lens. The law: read-only, as the rest of the lens — the state is asked
`conversations` and `lines` only (nothing is opened, touched or appended), and a conversation's
page reads only its own scope's artifacts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

from byref.conversations import SHARED_CONVERSATION, Conversation, ConversationState
from byref.lens.pages.markup import empty, esc, gap, link, num, path_part, table
from byref.lens.reading.readonly import ReadOnlyStore
from byref.lens.reading.run import Run, transcript_of
from byref.lens.serving.web import Lens, Response, html_response
from byref.store import ArtifactStore, Scope

LINES_A_READ = 500
NO_TRACE = ("A conversation read from a store has no event trace (events go to the gateway's "
            "log, not its store): mints, searches and refusals the trace would add are not shown.")


def conversation_run(state: ConversationState, conversation: Conversation,
                     store: ArtifactStore | None, *, source: str = "",
                     artifacts: Scope | None = None) -> Run:
    """One stored conversation as a `Run` (its lines as they are now, copied; `artifacts`: the
    scope its stored results live in, when not the conversation's own)."""
    scope = conversation.scope

    def lines() -> Iterator[bytes]:
        seq, end = conversation.origin, conversation.next_seq
        while seq < end:
            got = state.lines(scope, seq, min(LINES_A_READ, end - seq))
            if not got:
                return  # expired or deleted meanwhile: what was read is shown
            for line in got:
                yield line if line.endswith(b"\n") else line + b"\n"
            seq += len(got)

    gaps = [NO_TRACE]
    if store is None:
        gaps.append("No artifact store was given (--store URL): artifacts can be named but not "
                    "shown.")
    # Its artifacts: where given, else its own scope and its principal's (a gateway keeps them
    # there, so a ref outlives its session).
    shared = Scope(scope.tenant, scope.principal, SHARED_CONVERSATION)
    kept = [artifacts] if artifacts is not None else [scope, shared]
    view = ReadOnlyStore(store, kept) if store is not None else None
    return Run(transcript_of(lines(), conversation.origin), [], view,
               source or f"conversation {scope}", gaps=gaps)


def find_conversation(state: ConversationState, wanted: str) -> Conversation | str:
    """The live conversation `wanted` names (`tenant/principal/id`, or an id alone when only
    one tenant and principal has it), or the sentence saying why there is none."""
    parts = wanted.split("/")
    every = state.conversations()
    if len(parts) == 3:
        found = [c for c in every if (c.scope.tenant, c.scope.principal,
                                      c.scope.conversation) == tuple(parts)]
    else:
        found = [c for c in every if c.scope.conversation == wanted]
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(str(c.scope) for c in found[:10])
        return (f"Conversation {wanted!r} is held by {len(found)} callers ({names}); pass "
                "--conversation tenant/principal/id.")
    names = ", ".join(str(c.scope) for c in every[:10]) or "none"
    return (f"The store holds no live conversation {wanted!r}. It holds {len(every):,}: "
            f"{names}{' …' if len(every) > 10 else ''}.")


class StoreLens:
    """The pages of every conversation `state` holds (`only`: just that one, at `/`)."""

    def __init__(self, state: ConversationState, store: ArtifactStore | None, *,
                 source: str, only: Conversation | None = None) -> None:
        self.state = state
        self.store = store
        self.source = source
        self.only = only
        self.base = ""
        self._lenses: dict[Scope, Lens] = {}
        self._lock = threading.Lock()

    def respond(self, method: str, target: str) -> Response:
        """The response to `target`, as `Lens.respond`."""
        if self.only is not None:
            return self._lens(self.only, "").respond(method, target)
        path = urlsplit(target).path
        if method in ("GET", "HEAD") and path in ("", "/"):
            return html_response(200, f"conversations in {self.source}", self._index(), "")
        parts = path.split("/")
        if len(parts) >= 6 and parts[1] == "c":
            wanted = tuple(unquote(p) for p in parts[2:5])
            found = [c for c in self.state.conversations()
                     if (c.scope.tenant, c.scope.principal, c.scope.conversation) == wanted]
            if found:
                base = "/".join(parts[:5])
                return self._lens(found[0], base).respond(method, target)
        return html_response(404, "Not found", gap(
            f"No live conversation at {path!r} in {self.source}."), "")

    def _lens(self, conversation: Conversation, base: str) -> Lens:
        key = conversation.scope
        with self._lock:
            held = self._lenses.get(key)
            # A conversation that grew since is read again; an unchanged one keeps its costs.
            if held is None or len(held.run.transcript) != conversation.length or (
                    held.base != base):
                held = self._lenses[key] = Lens(
                    conversation_run(self.state, conversation, self.store), base=base)
            return held

    def _index(self) -> str:
        listed = self.state.conversations()
        if not listed:
            return empty(f"{self.source} holds no live conversation.")
        rows = [(link(f"/c/{path_part(c.scope.tenant)}/{path_part(c.scope.principal)}/"
                      f"{path_part(c.scope.conversation)}/", c.scope.conversation),
                 esc(c.scope.tenant), esc(c.scope.principal), num(c.length))
                for c in listed]
        return (f"<p>{len(listed):,} live conversations in {esc(self.source)}:</p>"
                + table(("conversation", "tenant", "principal", "messages"), rows,
                        id_="conversations"))
