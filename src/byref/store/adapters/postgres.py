"""The PostgreSQL adapter (`postgresql://user@host:port/db?table=byref`): many workers, one store.

Owns connecting with psycopg 3 (the `postgres` extra, imported only here),
creating the schema once under an advisory lock, and the two connections the shared SQL engine
runs on: a writer whose put is one transaction, with retention serialized per scope by a
transaction-scoped advisory lock (so concurrent writers from several processes keep the ceilings),
and an autocommit reader whose multi-statement reads run as repeatable-read snapshots. The
payload is chunked into 1 MiB rows and streams both ways.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from byref.events import Emitter
from byref.store.adapters._sql import SqlStore, Tx, schema
from byref.store.adapters.pg import PgTx, first_line, import_psycopg, redact
from byref.store.port import StoreUnavailableError, StoreURLError
from byref.store.retention import Retention

if TYPE_CHECKING:
    pass

_SCHEMA_LOCK = 0x62797265  # "byre": one advisory key for schema creation


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
        pg = import_psycopg(StoreUnavailableError, "The PostgreSQL store")
        self.conninfo, self.table = conninfo, table
        self._tables = {"a": f"{table}_artifacts", "c": f"{table}_chunks"}
        try:
            self._writer = pg.connect(conninfo, connect_timeout=max(1, int(connect_timeout)))
            self._reader = pg.connect(
                conninfo, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
        except pg.ProgrammingError as exc:  # libpq refused the connection string itself
            raise StoreURLError(
                f"Store URL {redact(conninfo)!r} is not a valid PostgreSQL connection string: "
                f"{first_line(exc)}. Options are libpq's (sslmode, connect_timeout, …) plus "
                "table, ttl, max_bytes, max_count."
            ) from None
        except pg.OperationalError as exc:
            first = first_line(exc)
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
                f"{table + '_chunks'!r} at {redact(conninfo)!r}: {first_line(exc)}. Grant the "
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
            yield PgTx(cur, self._tables)

    @contextmanager
    def _read(self) -> Iterator[Tx]:
        with self._rlock, self._reader.cursor(binary=True) as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield PgTx(cur, self._tables)
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
