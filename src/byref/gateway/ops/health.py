"""Start-up checks: what the gateway verifies before it serves a single request.

Owns `check_store`. The law: a store the gateway cannot write, read back and delete from is an
operator error at start, one line naming the store and what failed — never a first tool result
that fails to be kept, long after the client connected.
"""

from __future__ import annotations

from byref.gateway.config.file import GatewayConfig
from byref.store import ArtifactStore, PutOptions, Scope
from byref.store.port import StoreUnavailableError

PROBE = b"byref gateway start check"
PROBE_SCOPE_PRINCIPAL = "byref-gateway"


def check_store(store: ArtifactStore, config: GatewayConfig) -> None:
    """Put, read back and delete one small artifact; raise `StoreUnavailableError` if any fails."""
    where = config.store or "memory://"
    scope = Scope(config.scope, PROBE_SCOPE_PRINCIPAL, "start-check")
    step = "write to"
    try:
        meta = store.put(scope, PROBE, PutOptions(kind="probe", media_type="text/plain",
                                                  label="gateway start check"))
        step = "read back from"
        got = store.get(scope, meta.ref)
        if got is None or got.data != PROBE:
            raise StoreUnavailableError("what was written is not what is read back")
        step = "delete from"
        store.delete(scope, meta.ref)
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StoreUnavailableError(
            f"The artifact store {where!r} cannot be used: the gateway could not {step} it "
            f"({detail}). Check byref.store or --store.") from None
