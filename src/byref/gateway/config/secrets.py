"""The values a server's entry configures, and text with each of them taken out.

Owns `redactor`: for one `ServerConfig`, a function that replaces every value its entry configures
that may be a credential — header values (and each word of one, the token after `Bearer`), `env`
values, `args`, the URL's user, password, query values and fragment — wherever a text quotes it,
in the forms error messages quote it (as written, stripped, as Python's str and bytes reprs
escape it, URL- and JSON-encoded, hex, base64 standard and URL-safe with and without padding,
alone or inside a longer base64 text at any alignment, as a Basic credential is), and a value
that is itself base64 of text (a Basic credential) decoded too. The law: a redacted text holds
none of those forms; values
shorter than `MIN_CHARS` are left (a `-y` or a port is no secret, and taking it out of every word
would garble the text). Clients are never given an upstream's failure in its own words anyway
(`UpstreamError.public`); this is the second line, for the words an upstream itself answers
with, and for the operator's `/readyz`, which answers without a token.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from byref.gateway.config.servers import ServerConfig

MIN_CHARS = 6
"""Shorter configured values are not taken out of texts."""
MASK = "…"


def configured_values(config: ServerConfig) -> list[str]:
    """Every value `config` configures that may be a credential (see the module)."""
    values: list[str] = [*config.headers.values(), *config.env.values(), *config.args]
    for value in config.headers.values():
        values.extend(value.split())  # "Bearer <token>": the token alone, too
    if config.url is not None:
        parts = urlsplit(config.url)
        values += [p for p in (parts.username, parts.password, parts.fragment) if p]
        values += [v for _, v in parse_qsl(parts.query, keep_blank_values=False)]
        values += [parts.query] if parts.query else []
    return values + [d for v in values if (d := _decoded(v.strip())) is not None]


def _decoded(value: str) -> str | None:
    """The text `value` is base64 of (standard or URL-safe, padded or not), if it is."""
    if len(value) < MIN_CHARS or len(value) % 4 == 1:
        return None
    try:
        raw = base64.b64decode(value.translate(_URLSAFE) + "=" * (-len(value) % 4),
                               validate=True)
        text = raw.decode("utf-8")
    except ValueError:  # not base64 (binascii.Error), not ASCII, not UTF-8
        return None
    return text if text.isprintable() else None


_URLSAFE = str.maketrans("-_", "+/")
_STANDARD = str.maketrans("+/", "-_")


def _forms(value: str) -> Iterable[str]:
    yield value
    yield value.strip()
    yield repr(value)[1:-1]
    yield repr(value.encode("utf-8", "backslashreplace"))[2:-1]
    yield json.dumps(value)[1:-1]
    yield quote(value, safe="")
    yield quote(value)
    yield quote_plus(value)
    raw = value.encode("utf-8")
    yield raw.hex()
    yield raw.hex().upper()
    for encoded in _base64(raw):
        yield encoded
        yield encoded.translate(_STANDARD)


def _base64(raw: bytes) -> Iterable[str]:
    """`raw` in standard base64, padded and not, and the part of it that any base64 text holding
    `raw` at each of the three alignments shows whatever comes before and after."""
    whole = base64.b64encode(raw).decode("ascii")
    yield whole
    yield whole.rstrip("=")
    for skew in range(3):
        shown = base64.b64encode(b"\0" * skew + raw).decode("ascii")
        yield shown[-(-8 * skew // 6):(8 * (skew + len(raw))) // 6]


def redactor(config: ServerConfig) -> Callable[[str], str]:
    """`text` with every form of every configured value of `config` replaced by `MASK`."""
    forms = sorted({f for v in configured_values(config) if len(v.strip()) >= MIN_CHARS
                    for f in _forms(v) if len(f.strip()) >= MIN_CHARS}, key=len, reverse=True)

    def redact(text: str) -> str:
        for form in forms:  # longest first: a header's whole value before its token alone
            if form in text:
                text = text.replace(form, MASK)
        return text

    return redact
