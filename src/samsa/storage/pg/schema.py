"""Tables of the PostgreSQL engine (created on first start; every name starts with samsa_).

* ``samsa_meta``: counters (``topics_version`` bumped on every topic change, so nodes know
  when to re-read topics; ``producer_id`` the next block of producer ids).
* ``samsa_nodes``: the node registry: id, advertised address (and each listener's in
  ``listeners``, name -> [host, port]), rack, and ``expires_at``, the
  node's lease, renewed by the node. A node is live while ``expires_at > now()`` (the
  database's clock, so node clocks never matter) and, if it registered ``locked``, while
  it still holds its session advisory lock (:data:`LIVE`): a killed node's connections
  close at once, so it is found dead without waiting for its TTL.
* ``samsa_topics``: name, id, config overrides.
* ``samsa_partitions``: one row per partition (``__consumer_offsets`` partitions are the
  coordinator shards): log start and end offsets, and the lease: ``owner`` (a node id or
  NULL) and ``epoch``, bumped on every change of hands. It is also the leader epoch.
* ``samsa_scram_credentials``: SCRAM users (salted, as Kafka's UserScramCredentialRecord);
  ``samsa_meta.credentials_version`` is bumped on every change, so nodes re-read them.
* ``samsa_batches``: the log: one row per record batch exactly as it arrived on the wire
  (base offset patched), with its base and last offsets, max timestamp and producer fields.
* ``samsa_acls``: the ACLs (Kafka's codes), one row each; ``acls_version`` in
  ``samsa_meta`` is bumped on every change, so nodes know when to reload them.
* ``samsa_share_states``: one row per (partition, share group): the share partition's last
  snapshot (NULL: forgotten), saved by the partition's lease owner, and ``reset``, the
  ``share_resets`` count of ``samsa_meta`` at the last admin change of it (any node), which
  fences the owner's older saves (:mod:`samsa.storage.pg.shares`).
* ``samsa_txn_markers``: transaction markers forwarded to the nodes leading their
  partitions (:mod:`samsa.storage.pg.txn_markers`).
* ``samsa_configs``: the dynamic configs (``kind`` broker or group, the resource's name,
  its configs); ``configs_version`` in ``samsa_meta`` is bumped on every change, so nodes
  re-read them (:mod:`samsa.storage.pg.configs`).
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.batch import BATCH_OVERHEAD
from samsa.storage.pg import txn_markers

DDL = """
CREATE TABLE IF NOT EXISTS samsa_meta (
    k text PRIMARY KEY,
    v bigint NOT NULL
);
INSERT INTO samsa_meta VALUES ('topics_version', 0), ('producer_id', 0)
    ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS samsa_nodes (
    id integer PRIMARY KEY,
    host text NOT NULL,
    port integer NOT NULL,
    rack text,
    incarnation uuid NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS samsa_topics (
    name text PRIMARY KEY,
    id uuid NOT NULL UNIQUE,
    configs jsonb NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS samsa_partitions (
    pid bigserial PRIMARY KEY,
    topic text NOT NULL REFERENCES samsa_topics(name) ON DELETE CASCADE,
    idx integer NOT NULL,
    log_start bigint NOT NULL DEFAULT 0,
    log_end bigint NOT NULL DEFAULT 0,
    owner integer,
    epoch integer NOT NULL DEFAULT 0,
    UNIQUE (topic, idx)
);
CREATE TABLE IF NOT EXISTS samsa_batches (
    pid bigint NOT NULL,
    base_offset bigint NOT NULL,
    last_offset bigint NOT NULL,
    max_ts bigint NOT NULL,
    producer_id bigint NOT NULL,
    size integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (pid, base_offset)
);
INSERT INTO samsa_meta VALUES ('acls_version', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS samsa_acls (
    resource_type smallint NOT NULL,
    name text NOT NULL,
    pattern_type smallint NOT NULL,
    principal text NOT NULL,
    host text NOT NULL,
    operation smallint NOT NULL,
    permission smallint NOT NULL,
    PRIMARY KEY (resource_type, name, pattern_type, principal, host, operation, permission)
);
ALTER TABLE samsa_nodes ADD COLUMN IF NOT EXISTS locked boolean NOT NULL DEFAULT false;
ALTER TABLE samsa_nodes ADD COLUMN IF NOT EXISTS listeners jsonb NOT NULL DEFAULT '{}';
CREATE TABLE IF NOT EXISTS samsa_scram_credentials (
    name text NOT NULL,
    mechanism text NOT NULL,
    salt bytea NOT NULL,
    stored_key bytea NOT NULL,
    server_key bytea NOT NULL,
    iterations integer NOT NULL,
    PRIMARY KEY (name, mechanism)
);
INSERT INTO samsa_meta VALUES ('credentials_version', 0) ON CONFLICT DO NOTHING;
ALTER TABLE samsa_batches ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX IF NOT EXISTS samsa_batches_producers ON samsa_batches (pid, producer_id, base_offset)
    WHERE producer_id >= 0;
CREATE TABLE IF NOT EXISTS samsa_share_states (
    pid bigint NOT NULL REFERENCES samsa_partitions(pid) ON DELETE CASCADE,
    group_id text NOT NULL,
    epoch integer NOT NULL,
    seq bigint NOT NULL,
    state bytea,
    reset bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (pid, group_id)
);
INSERT INTO samsa_meta VALUES ('share_resets', 0) ON CONFLICT DO NOTHING;
CREATE INDEX IF NOT EXISTS samsa_share_states_groups ON samsa_share_states (group_id);
CREATE TABLE IF NOT EXISTS samsa_configs (
    kind text NOT NULL,
    name text NOT NULL,
    configs jsonb NOT NULL,
    PRIMARY KEY (kind, name)
);
INSERT INTO samsa_meta VALUES ('configs_version', 0) ON CONFLICT DO NOTHING;
"""

NODE_LOCK = 7316
"""First key of each node's session advisory lock ``(NODE_LOCK, node id)``."""

#: A node ``n`` (a samsa_nodes row) that is live.
LIVE = f"""(n.expires_at > now() AND (NOT n.locked OR EXISTS (
    SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
      AND l.classid = {NODE_LOCK} AND l.objid::bigint = n.id AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))))"""

#: The partitions of a round this node still owns at the epoch it wrote with (checked
#: before a retried round copies its batches in; :data:`COMMIT_END` fences them again).
OWNED = """
SELECT p.pid FROM samsa_partitions p
JOIN unnest($2::bigint[], $3::integer[]) AS v(pid, epoch) ON p.pid = v.pid
WHERE p.owner = $1 AND p.epoch = v.epoch
"""

#: The columns of ``samsa_batches`` a round copies in, in order.
BATCH_COLUMNS = ("pid", "base_offset", "last_offset", "max_ts", "producer_id", "size", "data")

#: The fence of a round, last statement of its transaction: each written partition's log
#: end moves to the round's end only where this node still owns it at the epoch it wrote
#: with and the stored log end is where the round's first batch starts (the round before
#: committed). Returns the partitions that passed; the round commits only if all did.
COMMIT_END = """
UPDATE samsa_partitions p SET log_end = v.log_end
FROM unnest($2::bigint[], $3::integer[], $4::bigint[], $5::bigint[])
     AS v(pid, epoch, log_start, log_end)
WHERE p.pid = v.pid AND p.owner = $1 AND p.epoch = v.epoch AND p.log_end = v.log_start
RETURNING p.pid
"""

#: Whole batches from the one holding $2, below $3, about $4 bytes (at least one batch).
READ = """
SELECT base_offset, last_offset, data FROM (
    SELECT base_offset, last_offset, data,
           sum(size) OVER (ORDER BY base_offset) - size AS before
    FROM samsa_batches
    WHERE pid = $1 AND last_offset >= $2 AND base_offset < $3
      AND base_offset >= coalesce((SELECT max(base_offset) FROM samsa_batches
                                   WHERE pid = $1 AND base_offset <= $2), 0)
    ORDER BY base_offset LIMIT 4096
) s WHERE before < $4
"""

#: The headers of the last five batches of every producer (rebuilding producer state).
PRODUCER_HEADERS = f"""
SELECT base_offset, substring(data from 1 for {BATCH_OVERHEAD}) AS header FROM (
    SELECT base_offset, data,
           row_number() OVER (PARTITION BY producer_id ORDER BY base_offset DESC) AS rn
    FROM samsa_batches WHERE pid = $1 AND producer_id >= 0 AND base_offset >= $2
) s WHERE rn <= 5 ORDER BY base_offset
"""

#: Moves the log start offset (retention, DeleteRecords) under the writer's lease.
SET_LOG_START = """
WITH ok AS (
    UPDATE samsa_partitions SET log_start = greatest(log_start, $4)
    WHERE pid = $1 AND owner = $2 AND epoch = $3 RETURNING pid, log_start
), gone AS (
    DELETE FROM samsa_batches WHERE pid IN (SELECT pid FROM ok)
        AND last_offset < (SELECT log_start FROM ok)
)
SELECT log_start FROM ok
"""


async def create_schema(pool: Any) -> None:
    # One node at a time: concurrent CREATE TABLE IF NOT EXISTS can still collide.
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(7316001)")
        await conn.execute(DDL)
        await conn.execute(txn_markers.DDL)
