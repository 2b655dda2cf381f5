"""SCRAM credentials of a cluster, in ``samsa_scram_credentials``.

Every node keeps them in memory (authentication reads no database) and re-reads them when
``samsa_meta.credentials_version`` moved: the broker polls it every second, so a change made
on one node applies on every node within a second.
"""

from __future__ import annotations

from typing import Any

from samsa.security.credentials import CredentialStore, ScramCredential
from samsa.storage.pg.db import Database

_READ = "SELECT name, mechanism, salt, stored_key, server_key, iterations " \
        "FROM samsa_scram_credentials"
_VERSION = "SELECT v FROM samsa_meta WHERE k = 'credentials_version'"


class PgCredentialStore(CredentialStore):
    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db
        self.version: int | None = None

    async def refresh(self) -> None:
        async def read(pool: Any) -> tuple[int, list[Any] | None]:
            async with pool.acquire() as conn:
                version = int(await conn.fetchval(_VERSION))
                if version == self.version:
                    return version, None
                return version, list(await conn.fetch(_READ))

        version, rows = await self.db.run(read)
        if rows is None:
            return
        users: dict[str, dict[str, ScramCredential]] = {}
        for r in rows:
            users.setdefault(r["name"], {})[r["mechanism"]] = ScramCredential(
                bytes(r["salt"]), bytes(r["stored_key"]), bytes(r["server_key"]),
                int(r["iterations"]))
        self.replace_all(users)
        self.version = version

    async def alter(self, upserts: list[tuple[str, str, ScramCredential]],
                    deletions: list[tuple[str, str]]) -> None:
        await self.db.run(lambda pool: write(pool, upserts, deletions))
        self.apply(upserts, deletions)


async def write(pool: Any, upserts: list[tuple[str, str, ScramCredential]],
                deletions: list[tuple[str, str]]) -> None:
    """Apply a change in one transaction and bump the version."""
    async with pool.acquire() as conn, conn.transaction():
        for name, mechanism in deletions:
            await conn.execute("DELETE FROM samsa_scram_credentials WHERE name = $1 AND "
                               "mechanism = $2", name, mechanism)
        for name, mechanism, c in upserts:
            await conn.execute(
                "INSERT INTO samsa_scram_credentials VALUES ($1, $2, $3, $4, $5, $6) "
                "ON CONFLICT (name, mechanism) DO UPDATE SET salt = $3, stored_key = $4, "
                "server_key = $5, iterations = $6",
                name, mechanism, c.salt, c.stored_key, c.server_key, c.iterations)
        await conn.execute("UPDATE samsa_meta SET v = v + 1 WHERE k = 'credentials_version'")
