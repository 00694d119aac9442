"""A replica that was not listening catches up: PostgreSQL drops the LISTEN connections of two
replicas (pg_terminate_backend), an activation on the first is announced while nobody hears it,
and once the second listens again it re-reads the record of every conversation it holds — its
handshake-era client is declared the activated tool."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from _gateway_rig import PG_URL, World, text
from test_gateway_replicas import TOKENS, client, replicas

from _waits import scaled

pytestmark = pytest.mark.anyio

TOKEN = next(iter(TOKENS))


def _listeners(table: str) -> list[tuple[int, float]]:
    """(pid, backend start as epoch seconds) of the connections listening on the channel."""
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, extract(epoch FROM backend_start) FROM pg_stat_activity WHERE "
            "application_name = %s", (f"byref-listen {table}_tool_lists"[:63],)).fetchall()
    return [(int(pid), float(start)) for pid, start in rows]


def _drop_listeners(table: str) -> int:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        killed = [pid for pid, _ in _listeners(table)
                  if conn.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()]
    return len(killed)


def _now() -> float:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
    assert row is not None
    return float(row[0])


async def test_an_activation_missed_while_not_listening_is_announced_after_reconnect(
        world: World, postgres_state: str) -> None:
    table = postgres_state.rsplit("table=", 1)[1]
    config = world.root / "reconnect.json"
    config.write_text(json.dumps({
        "mcpServers": {"shared": world.fixture("shared_list.py", env={
            "SHARED_TOOLS": str(Path(world.root / "tools.json"))})},
        "byref": {"tokens": TOKENS, "replicas": True, "state": postgres_state,
                  "store": f"file://{world.root / 'store'}"}}))
    with world.log.open("a") as log, replicas(config, log, 2) as (_, ports):
        a, b = (f"http://127.0.0.1:{p}/mcp" for p in ports)
        with anyio.fail_after(scaled(60)):
            async with client(a, TOKEN) as on_a, client(b, TOKEN, mode="legacy") as on_b:
                # B holds the principal's conversation, without the tool; it indexes its
                # catalog first (a call waits for it; a list would not, and the server's
                # arrival would be announced on the stream below too).
                await on_b.call_tool("search_tools", {"query": "grow"})
                assert "shared__grow" not in {t.name for t in (await on_b.list_tools()).tools}
                assert len(await anyio.to_thread.run_sync(_listeners, table)) == 2
                assert await anyio.to_thread.run_sync(_drop_listeners, table) == 2
                while await anyio.to_thread.run_sync(_listeners, table):
                    await anyio.sleep(0.02)  # gone (each retries after RETRY_AFTER)
                got = await on_a.call_tool("activate_tool", {"names": ["shared__grow"]})
                assert not got.is_error, text(got)
                missed_at = await anyio.to_thread.run_sync(_now)
                while "shared__grow" not in {t.name for t in (await on_b.list_tools()).tools}:
                    await anyio.sleep(0.05)  # until B, listening again, re-read the record
                # The activation was announced while neither replica listened: both
                # listening connections began after it.
                again = await anyio.to_thread.run_sync(_listeners, table)
                assert len(again) == 2 and all(start > missed_at for _, start in again)
