"""The throwaway PostgreSQL answers queries on 127.0.0.1."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.pg import PostgresServer


def test_database_per_test(postgres: PostgresServer, pg_dsn: str) -> None:
    async def query() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            return int(await conn.fetchval("SELECT 40 + 2"))
        finally:
            await conn.close()

    assert asyncio.run(query()) == 42
    assert pg_dsn.startswith(f"postgresql://postgres@127.0.0.1:{postgres.port}/")
