"""Dynamic configs kept in PostgreSQL, shared by every node of the cluster (the engine's
:class:`~samsa.broker.storage.ConfigStore`): the cluster-wide broker defaults, each node's
own dynamic settings (``BROKER`` resource named by its id) and the group configs, one row
per resource in ``samsa_configs``.

A change is one transaction: the resource's row, a bump of ``configs_version``, a read of
every row (the node's new view, with the other nodes' changes committed before it) and a
``NOTIFY samsa_cluster``. The other nodes read the rows again when their cluster tick finds
the version moved (:meth:`PgConfigStore.offer`, then the broker's
:meth:`~samsa.broker.dynamic_config.DynamicConfigs.refresh`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from samsa.broker.storage import StoredConfigs
from samsa.storage.pg.db import Database

BROKER, GROUP = "broker", "group"
"""``samsa_configs.kind`` values."""

_BUMP = "UPDATE samsa_meta SET v = v + 1 WHERE k = 'configs_version' RETURNING v"
_ROWS = "SELECT kind, name, configs::text FROM samsa_configs"

Snapshot = tuple[int, list[Any]]
"""(configs_version, rows), from :func:`fetch_configs`."""


async def fetch_configs(pool: Any) -> Snapshot:
    """The version and every row, read together."""
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read",
                                                        readonly=True):
        version = await conn.fetchval("SELECT v FROM samsa_meta WHERE k = 'configs_version'")
        rows = await conn.fetch(_ROWS)
    return int(version), list(rows)


class PgConfigStore:
    """The ``samsa_configs`` table, and the version of the view this node last took."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.version = -1
        self._offered: Snapshot | None = None

    def offer(self, snapshot: Snapshot) -> None:
        """A snapshot read elsewhere (the lease tick): the next :meth:`snapshot` is it."""
        self._offered = snapshot

    def snapshot(self) -> StoredConfigs | None:
        offered, self._offered = self._offered, None
        return self._take(offered if offered is not None else self.db.run_sync(fetch_configs))

    async def save_broker(self, name: str, props: Mapping[str, str]) -> StoredConfigs | None:
        return await self._save(BROKER, name, props)

    async def save_group(self, group_id: str, props: Mapping[str, str]
                         ) -> StoredConfigs | None:
        return await self._save(GROUP, group_id, props)

    async def _save(self, kind: str, name: str, props: Mapping[str, str]
                    ) -> StoredConfigs | None:
        data = json.dumps(dict(props), sort_keys=True)

        async def job(pool: Any) -> Snapshot:
            async with pool.acquire() as conn, conn.transaction():
                if props:
                    await conn.execute(
                        "INSERT INTO samsa_configs (kind, name, configs) VALUES ($1, $2, $3) "
                        "ON CONFLICT (kind, name) DO UPDATE SET configs = EXCLUDED.configs",
                        kind, name, data)
                else:
                    await conn.execute(
                        "DELETE FROM samsa_configs WHERE kind = $1 AND name = $2", kind, name)
                # the bump waits for every other change in flight: the read after it
                # sees them all
                version = await conn.fetchval(_BUMP)
                rows = await conn.fetch(_ROWS)
                await conn.execute("NOTIFY samsa_cluster")
            return int(version), list(rows)

        # on the database thread; a tick may take a newer snapshot meanwhile (then None)
        return self._take(await self.db.run(job))

    def _take(self, snapshot: Snapshot) -> StoredConfigs | None:
        version, rows = snapshot
        if version <= self.version:  # nothing new (or read before the last one taken)
            return None
        self.version = version
        layers: dict[str, dict[str, dict[str, str]]] = {BROKER: {}, GROUP: {}}
        for r in rows:
            layers.setdefault(r["kind"], {})[r["name"]] = {
                str(k): str(v) for k, v in json.loads(r["configs"]).items()}
        return StoredConfigs(layers[BROKER], layers[GROUP])
