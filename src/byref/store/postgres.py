"""The PostgreSQL adapter (`postgresql://user@host:port/db?table=byref`): many workers, one store.

Owns connecting with psycopg 3 (an extra: `pip install 'byref[postgres]'`, imported only here),
creating the schema once under an advisory lock, and the two connections the shared SQL engine
runs on: a writer whose put is one transaction, with retention serialized per scope by a
transaction-scoped advisory lock (so concurrent writers from several processes keep the ceilings),
and an autocommit reader whose multi-statement reads run as repeatable-read snapshots. The
payload is chunked into 1 MiB rows and streams both ways.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from byref.events import Emitter
from byref.store._sql import SqlStore, Tx, schema
from byref.store.port import StoreUnavailableError, StoreURLError
from byref.store.retention import Retention

if TYPE_CHECKING:
    import psycopg

_SCHEMA_LOCK = 0x62797265  # "byre": one advisory key for schema creation


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailableError(
            "The PostgreSQL store needs psycopg 3; install it with: pip install 'byref[postgres]'"
        ) from None
    return psycopg


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact(url: str) -> str:
    """The URL with any password replaced, fit for an error message or a log."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class _PgTx:
    def __init__(self, cur: psycopg.Cursor[Any], prefix: str) -> None:
        self._cur, self._prefix = cur, prefix

    def _sql(self, sql: str) -> str:
        return sql.replace("{a}", f"{self._prefix}_artifacts").replace(
            "{c}", f"{self._prefix}_chunks").replace("?", "%s")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._cur.execute(self._sql(sql), tuple(params))
        return self._cur.fetchall() if self._cur.description else []

    def count(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(self._sql(sql), tuple(params))
        return int(self._cur.rowcount)


class PostgresStore(SqlStore):
    """The `postgresql://` adapter: records and chunked payloads in two tables, shared by every
    process that connects."""
    def __init__(
        self,
        conninfo: str,
        *,
        table: str = "byref",
        retention: Retention | None = None,
        clock: Callable[[], float] | None = None,
        emit: Emitter | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(retention=retention, clock=clock, emit=emit)
        pg = _psycopg()
        self.conninfo, self.table = conninfo, table
        try:
            self._writer = pg.connect(conninfo, connect_timeout=max(1, int(connect_timeout)))
            self._reader = pg.connect(
                conninfo, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
        except pg.ProgrammingError as exc:  # libpq refused the connection string itself
            raise StoreURLError(
                f"Store URL {redact(conninfo)!r} is not a valid PostgreSQL connection string: "
                f"{_first_line(exc)}. Options are libpq's (sslmode, connect_timeout, …) plus "
                "table, ttl, max_bytes, max_count."
            ) from None
        except pg.OperationalError as exc:
            first = _first_line(exc)
            raise StoreUnavailableError(
                f"Cannot reach PostgreSQL at {redact(conninfo)!r}: {first}. Start the server, "
                "or fix the host, port, user or database in the store URL."
            ) from exc
        self._wlock, self._rlock = threading.RLock(), threading.RLock()
        try:
            with self._write() as tx:
                tx.rows("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
                for statement in schema("BYTEA", "DOUBLE PRECISION"):
                    tx.count(statement)
        except pg.Error as exc:
            self.close()
            raise StoreUnavailableError(
                f"Cannot create the store's tables {table + '_artifacts'!r} and "
                f"{table + '_chunks'!r} at {redact(conninfo)!r}: {_first_line(exc)}. Grant the "
                "user CREATE on the database, or pick another table= prefix."
            ) from exc

    @property
    def url(self) -> str:
        """The URL that reopens this store (with its table)."""
        sep = "&" if "?" in self.conninfo else "?"
        return f"{self.conninfo}{sep}table={self.table}"

    @contextmanager
    def _write(self) -> Iterator[Tx]:
        with self._wlock, self._writer.transaction(), self._writer.cursor(binary=True) as cur:
            yield _PgTx(cur, self.table)

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        with self._rlock, self._reader.cursor(binary=True) as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield _PgTx(cur, self.table)
            finally:
                cur.execute("COMMIT")

    def _lock_scope(self, tx: Tx, scope_key: str) -> None:
        tx.rows("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (scope_key,))

    def drop_tables(self) -> None:
        """Remove this store's two tables (test and benchmark clean-up)."""
        with self._write() as tx:
            tx.count("DROP TABLE IF EXISTS {a}")
            tx.count("DROP TABLE IF EXISTS {c}")

    def close(self) -> None:
        """Close both connections."""
        self._writer.close()
        self._reader.close()
