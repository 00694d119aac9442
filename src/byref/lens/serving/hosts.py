"""Which `Host` the lens answers: only the names it was started for.

Owns the lens server's defence against DNS rebinding: a web page on another site that points its
own name at 127.0.0.1 reaches the lens with that name in `Host` (or in an absolute-form request
target), and must be refused before any page is drawn. The law: a request is answered only when
its authority — the absolute-form target's if it has one (RFC 9112 §3.2.2), else the `Host`
header, which must be present — is one of the allowed `host:port` names, compared without case;
anything else is 421 with one line saying which names are answered. The allowed names are the
address listened on and, for a loopback or wildcard address, the loopback names, each with the
port (a bare name too on port 80), plus what the operator adds (`--allow-host`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::")


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The `Host` values a lens listening on `host`:`port` answers, lower-cased."""
    names = {_bracketed(host)} if host not in WILDCARDS else set()
    if host in WILDCARDS or host == "localhost" or _is_loopback(host):
        names.update(LOOPBACK_NAMES)
    names.update(_bracketed(n.strip()) for n in extra if n.strip())
    out: set[str] = set()
    for name in names:
        name = name.lower().rstrip(".")
        if _has_port(name):
            out.add(name)  # an operator's name with its own port (behind a proxy)
            continue
        out.add(f"{name}:{port}")
        if port == 80:
            out.add(name)
    return frozenset(out)


def misdirected(target: str, host_header: str | None, allowed: frozenset[str]) -> str | None:
    """None when the request is for this lens; else the line that refuses it."""
    if target.startswith("/"):
        authority = host_header
    elif "://" in target:  # absolute-form: its authority is the one that counts
        try:
            authority = urlsplit(target).netloc.rpartition("@")[2]
        except ValueError:  # an authority that does not parse names no host of this lens
            authority = target[:100]
    else:
        authority = None  # authority-form, asterisk-form: never a page of the lens
    if authority is not None and authority.strip().lower().rstrip(".") in allowed:
        return None
    shown = ", ".join(sorted(allowed))
    what = "no Host" if not authority else f"Host {authority[:100]!r}"
    return (f"This lens answers only for {shown}; a request for {what} is refused (a page on "
            "another site may be pointing its name here). Start `byref lens` with "
            "--allow-host NAME to answer another name.\n")


def _bracketed(host: str) -> str:
    """An IPv6 address as a Host header writes it; any other name as it is."""
    try:
        return f"[{host}]" if ipaddress.ip_address(host).version == 6 else host
    except ValueError:
        return host


def _has_port(name: str) -> bool:
    tail = name.rpartition("]")[2] if name.startswith("[") else name
    return ":" in tail


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
