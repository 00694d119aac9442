"""psycopg 3 for byref's PostgreSQL adapters: the artifact store, conversation state and the
replicas' list-change channel.

Owns importing the `byref[postgres]` extra only when an adapter is opened (with the install hint
in the adapter's own error), SQL text written with `{name}` table placeholders and `?`
parameters (as the shared SQLite/PostgreSQL engines write it), a server message's first line,
and URLs with their password redacted for messages and logs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from byref.errors import install_hint

if TYPE_CHECKING:
    import psycopg


def import_psycopg(error: Callable[[str], Exception], what: str) -> Any:
    """The psycopg module, or `error("<what> needs psycopg 3; install it with: …")` raised."""
    try:
        import psycopg
    except ImportError:
        raise error(f"{what} needs psycopg 3; install it with: {install_hint('postgres')}"
                    ) from None
    return psycopg


class PgTx:
    """One cursor's statements: `{name}` placeholders become `names[name]`, `?` becomes `%s`."""

    def __init__(self, cur: psycopg.Cursor[Any], names: Mapping[str, str]) -> None:
        self._cur = cur
        self._names = [("{" + key + "}", value) for key, value in names.items()]

    def _sql(self, sql: str) -> str:
        for placeholder, value in self._names:
            sql = sql.replace(placeholder, value)
        return sql.replace("?", "%s")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The statement's rows (none for a statement that returns none)."""
        self._cur.execute(self._sql(sql), tuple(params))
        return self._cur.fetchall() if self._cur.description else []

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        """How many rows the statement touched."""
        self._cur.execute(self._sql(sql), tuple(params))
        return int(self._cur.rowcount)


def first_line(exc: BaseException) -> str:
    """The first line of a driver or server message (the rest is context for a log)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact(url: str) -> str:
    """The URL with any password replaced, fit for an error message or a log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))
