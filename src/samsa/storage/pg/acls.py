"""ACLs kept in PostgreSQL, shared by every node of the cluster (the authorizer's store).

A change is one transaction: the rows, a bump of ``acls_version`` and a ``NOTIFY
samsa_cluster``, which wakes every node's cluster tick at once; a node whose loaded version
differs from the database's reloads the whole set (:meth:`Authorizer.sync`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from samsa.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.storage.pg.db import Database

_COLUMNS = "resource_type, name, pattern_type, principal, host, operation, permission"
_BUMP = "UPDATE samsa_meta SET v = v + 1 WHERE k = 'acls_version' RETURNING v"


def _columns(acls: Sequence[AclBinding]) -> list[list[Any]]:
    return [[int(b.resource_type) for b in acls], [b.name for b in acls],
            [int(b.pattern_type) for b in acls], [b.principal for b in acls],
            [b.host for b in acls], [int(b.operation) for b in acls],
            [int(b.permission) for b in acls]]


class PgAclStore:
    """An :class:`~samsa.security.authorizer.AclStore` in the cluster's database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def load(self) -> tuple[int, list[AclBinding]]:
        async def job(pool: Any) -> tuple[int, list[Any]]:
            async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read",
                                                                readonly=True):
                version = await conn.fetchval(
                    "SELECT v FROM samsa_meta WHERE k = 'acls_version'")
                rows = await conn.fetch(f"SELECT {_COLUMNS} FROM samsa_acls")
            return int(version), list(rows)

        version, rows = await self.db.run(job)
        return version, [AclBinding(ResourceType(r["resource_type"]), r["name"],
                                    PatternType(r["pattern_type"]), r["principal"], r["host"],
                                    AclOperation(r["operation"]),
                                    AclPermissionType(r["permission"])) for r in rows]

    async def add(self, acls: Sequence[AclBinding]) -> int:
        return await self._change(
            f"INSERT INTO samsa_acls ({_COLUMNS}) SELECT * FROM unnest($1::smallint[], "
            "$2::text[], $3::smallint[], $4::text[], $5::text[], $6::smallint[], "
            "$7::smallint[]) ON CONFLICT DO NOTHING", acls)

    async def remove(self, acls: Sequence[AclBinding]) -> int:
        return await self._change(
            f"DELETE FROM samsa_acls WHERE ({_COLUMNS}) IN (SELECT * FROM unnest("
            "$1::smallint[], $2::text[], $3::smallint[], $4::text[], $5::text[], "
            "$6::smallint[], $7::smallint[]))", acls)

    async def _change(self, statement: str, acls: Sequence[AclBinding]) -> int:
        columns = _columns(acls)

        async def job(pool: Any) -> int:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(statement, *columns)
                version = await conn.fetchval(_BUMP)
                await conn.execute("NOTIFY samsa_cluster")
            return int(version)

        return await self.db.run(job)
