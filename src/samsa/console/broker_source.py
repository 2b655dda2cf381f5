"""The console inside a samsa broker: the coordinator's views, read on the broker's loop.

It knows the groups of the coordinator shards this node leads (on a single node: all of
them; in a cluster, each node's console shows its own shards' groups, and the health panel
names every shard's owner). Lag in seconds is the age of the first unconsumed record, read
from the partition's log; phantom lag is told apart: offsets below the log start (removed
by retention before the group read them) and, on compacted topics, offsets compaction
removed (counted from the batches' record counts, up to a bound).

Share groups' share partitions (start offset, lag, in-flight records by state) come from
the node's share runtime, for the partitions it leads.

It acts as ``console.principal``, through the broker's authorizer (:func:`samsa.broker.access.may`;
everything, without one): its views show only the groups that principal may DESCRIBE (another
answers 403) and, in them, only the topics it may DESCRIBE. Its admin client (the offset
resets) reaches this node through an in-process connection authenticated as that principal
(:meth:`~samsa.broker.server.Broker.local_connection`), so the broker's handlers decide what
it may do, as for any client; other nodes of a cluster it reaches over TCP as before.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from samsa.broker import access
from samsa.broker.metrics import share_partitions
from samsa.console import views
from samsa.console.lag import LagSample
from samsa.console.source import ConsoleOptions, Source, now_ms
from samsa.coordinator.history.model import LoadInfo
from samsa.coordinator.shard import ShardStatus
from samsa.protocol.records import decode_batches
from samsa.security.acl import AclOperation, ResourceType
from samsa.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from samsa.broker.partition import Partition
    from samsa.broker.server import Broker

#: bytes read to find the record at a committed offset
_READ_BYTES = 64 * 1024
#: batches scanned to count the records compaction left in a lag
_COUNT_BATCHES = 256
_HEADER = struct.Struct(">qi")  # base offset, batch length
_COUNT_AT = 57  # the record count's offset in a v2 batch header
_TS_CACHE = 20_000


class BrokerSource(Source):
    kind = "broker"

    def __init__(self, broker: Broker, options: ConsoleOptions) -> None:
        """Made on the broker's event loop."""
        super().__init__(options)
        self.broker = broker
        self.principal = KafkaPrincipal.parse(options.principal)
        self._loop = asyncio.get_running_loop()
        self._admin: Any = None
        self._timestamps: dict[tuple[str, int, int], int] = {}

    # ------------------------------------------------------------------ what it may see

    def _may(self, op: AclOperation, rtype: ResourceType, name: str) -> bool:
        return access.may(self.broker.authorizer, self.options.principal, access.NO_ADDRESS,
                          op, rtype, name)

    def visible(self, group_id: str) -> bool:
        return self._may(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)

    def _topics(self) -> Callable[[str], bool]:
        """Whether the principal may DESCRIBE a topic (each decided once per call)."""
        if self.broker.authorizer is None:
            return lambda topic: True
        return cache(lambda topic: self._may(AclOperation.DESCRIBE, ResourceType.TOPIC, topic))

    @property
    def features(self) -> dict[str, bool]:
        return {**super().features, "history": self._history_on(), "liveness": True,
                "health": True, "share_groups": True}

    def _history_on(self) -> bool:
        coordinator = self.broker.groups.coordinator
        return coordinator is not None and coordinator.config.history_max_events > 0

    def admin(self) -> Any:
        if self._admin is None:
            from samsa.client import Admin

            config = self.broker.config
            self._admin = Admin(f"{config.host}:{self.broker.port}", client_id="samsa-console",
                                connector=self._connect)
        return self._admin

    def _connect(self, address: tuple[str, int]) -> socket.socket | None:
        """The admin client's connections to this node: in-process, as the principal
        (network thread); None (TCP) for another node's."""
        broker = self.broker
        own = {*broker.endpoints.values(), (broker.config.host, broker.port)}
        if tuple(address) not in own:
            return None
        made = asyncio.run_coroutine_threadsafe(broker.local_connection(self.principal),
                                                self._loop)
        try:
            return made.result(10)
        except Exception as exc:  # the broker is stopping
            if not made.cancel() and made.done() and made.exception() is None:
                made.result().close()  # made meanwhile: nobody else will close it
            raise OSError(f"no in-process connection: {exc}") from exc

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
        super().close()

    # ------------------------------------------------------------------ groups

    async def groups(self) -> list[dict[str, Any]]:
        coordinator = self.broker.groups.coordinator
        if coordinator is None:
            return []
        now, node = now_ms(), self.broker.config.node_id
        rows = []
        for s in coordinator.group_summaries():
            if not self.visible(s.group_id):
                continue
            last = next((e for e in reversed(coordinator.history(s.group_id)) if e.bumps), None)
            rows.append({
                "group_id": s.group_id, "group_type": s.group_type, "state": s.state.value,
                "protocol_type": s.protocol_type, "protocol": s.protocol, "members": s.members,
                "epoch": s.generation, "coordinator": {"node_id": node, "partition": s.partition},
                "lag": views.totals(s.group_id, self.tracker, now),
                "last_rebalance": None if last is None else {
                    "at_ms": last.at_ms, "cause": last.cause.value, "member_id": last.member_id,
                    "outcome": last.outcome.value, "ended_ms": last.ended_ms},
            })
        return rows

    async def group(self, group_id: str) -> dict[str, Any] | None:
        self.check_visible(group_id)
        coordinator = self.broker.groups.coordinator
        detail = None if coordinator is None else coordinator.group_detail(group_id, now_ms())
        if detail is None:
            return None
        return _only_topics(views.detail_json(detail, self.broker.config.node_id),
                            self._topics())

    async def history(self, group_id: str) -> list[dict[str, Any]] | None:
        self.check_visible(group_id)
        coordinator = self.broker.groups.coordinator
        if coordinator is None or not self._history_on():
            return None
        seen = self._topics()
        events = [views.event_json(e) for e in coordinator.history(group_id)]
        for e in events:  # an offset reset names its topics
            if "topics" in e["detail"]:
                e["detail"]["topics"] = ",".join(
                    t for t in e["detail"]["topics"].split(",") if seen(t))
        return events

    def lag(self, group_id: str) -> dict[str, Any]:
        self.check_visible(group_id)
        return super().lag(group_id)

    async def share_partitions(self, group_id: str) -> list[dict[str, Any]] | None:
        """The share partitions this node leads of a share group (from its share runtime:
        the record counts are no field of Kafka's APIs), without topics the principal may
        not DESCRIBE."""
        self.check_visible(group_id)
        seen = self._topics()
        rows = [views.share_partition_json(topic, index, stats)
                for _, topic, index, stats in share_partitions(self.broker.shares,
                                                                  self.broker.topics, group_id)
                if seen(topic)]
        coordinator = self.broker.groups.coordinator
        summary = None if coordinator is None else coordinator.group_summary(group_id)
        if not rows and (summary is None or summary.group_type != "share"):
            return None
        return rows

    async def health(self) -> dict[str, Any] | None:
        cluster = self.broker.leadership.status()
        now = now_ms()
        groups, txns = self.broker.groups, self.broker.transactions
        shards: list[dict[str, Any]] = []
        takeovers = _takeovers(groups.loads, groups.loaded_at)
        if groups.coordinator is not None:
            counts: dict[int, int] = {}
            for s in groups.coordinator.group_summaries():
                counts[s.partition] = counts.get(s.partition, 0) + 1
            shards += _shard_rows("GROUP", {
                i: (shard.status.value, counts.get(i, 0))
                for i, shard in groups.coordinator.shards.items()}, groups.loads,
                groups.loaded_at)
        if txns.coordinator is not None and txns.shards is not None:
            shards += _shard_rows("TRANSACTION", {
                i: ((ShardStatus.ACTIVE if shard.loaded else ShardStatus.LOADING).value,
                    len(shard.txns)) for i, shard in txns.coordinator.shards.items()},
                txns.shards.loads, txns.shards.loaded_at)
            takeovers += _takeovers(txns.shards.loads, txns.shards.loaded_at)
        out: dict[str, Any] = {
            "node_id": self.broker.config.node_id, "at_ms": now,
            "shards": shards,
            "loading": sum(1 for s in shards if s["status"] == ShardStatus.LOADING.value),
            "active": sum(1 for s in shards if s["status"] == ShardStatus.ACTIVE.value),
            "last_failover_ms": max(takeovers, default=None),
            "since_failover_ms": None if not takeovers else now - max(takeovers),
            "cluster": None,
        }
        if cluster is not None:
            out["cluster"] = {
                "live_nodes": [n.node_id for n in self.broker.leadership.live_nodes()],
                "coordinator_leases": [
                    {"type": x.type, "topic": x.topic, "partition": x.partition,
                     "owner": x.owner, "epoch": x.epoch} for x in cluster.coordinator_leases],
                "takeovers": cluster.takeovers, "handoffs": cluster.handoffs,
                "lost": cluster.lost}
        return out

    # ------------------------------------------------------------------ lag

    async def sample(self) -> None:
        coordinator = self.broker.groups.coordinator
        if coordinator is None:
            return
        now = now_ms()
        seen = set()
        described = self._topics()
        for s in coordinator.group_summaries():
            gid = s.group_id
            if not self.visible(gid):
                continue
            seen.add(gid)
            keys = set()
            for c in coordinator.committed_offsets(gid):
                part = self.broker.topics.partition(c.topic, c.partition)
                if part is None or not described(c.topic):
                    continue
                keys.add((c.topic, c.partition))
                self.tracker.observe(gid, self._sample(part, c.topic, c.partition, c.offset,
                                                       c.commit_timestamp, now), now)
            self.tracker.retain(gid, keys)
        self.tracker.forget_others(seen)
        if len(self._timestamps) > _TS_CACHE:
            self._timestamps.clear()

    def _sample(self, part: Partition, topic: str, index: int, committed: int,
                commit_ms: int, now: int) -> LagSample:
        log = part.log
        start, end = log.log_start_offset, log.log_end_offset
        phantom, cause = 0, None
        seconds: float | None = 0.0
        if committed < start:
            phantom, cause = start - committed, "retention"
        first = max(committed, start)
        if first < end:
            ts = self._timestamp_at(part, topic, index, first)
            seconds = None if ts is None else max(now - ts, 0) / 1000
            if getattr(log.config, "compact", False):
                remaining = self._records_from(part, first, end)
                if remaining is not None and remaining < end - first:
                    phantom += end - first - remaining
                    cause = "compaction" if cause is None else "retention+compaction"
        return LagSample(topic, index, committed, start, end, seconds, phantom, cause,
                         commit_ms if commit_ms >= 0 else None)

    def _timestamp_at(self, part: Partition, topic: str, index: int, offset: int) -> int | None:
        key = (topic, index, offset)
        found = self._timestamps.get(key)
        if found is not None:
            return found
        try:
            data = bytes(part.log.read(offset, _READ_BYTES))
            for batch in decode_batches(data, check_crc=False):
                for off, ts, *_ in batch.records:
                    if off >= offset:
                        self._timestamps[key] = ts
                        return ts
        except Exception:  # out of range meanwhile, or not cached yet (cluster): unknown
            return None
        return None

    def _records_from(self, part: Partition, offset: int, end: int) -> int | None:
        """Records left in [offset, end) (compaction leaves gaps); None past the bound."""
        count, batches, at = 0, 0, offset
        try:
            while at < end and batches < _COUNT_BATCHES:
                data = bytes(part.log.read(at, 1 << 20))
                if not data:
                    return None
                pos = 0
                while pos + _COUNT_AT + 4 <= len(data):
                    base, length = _HEADER.unpack_from(data, pos)
                    if pos + 12 + length > len(data):
                        break
                    last_delta = struct.unpack_from(">i", data, pos + 23)[0]
                    records = struct.unpack_from(">i", data, pos + _COUNT_AT)[0]
                    if base >= offset:
                        count += records
                    elif base + last_delta >= offset:  # the batch holding offset: decode it
                        decoded = next(decode_batches(data[pos:pos + 12 + length],
                                                      check_crc=False))
                        count += sum(1 for off, *_ in decoded.records if off >= offset)
                    at = base + last_delta + 1
                    pos += 12 + length
                    batches += 1
                if pos == 0:
                    return None
        except Exception:
            return None
        return count if at >= end else None


def _only_topics(group: dict[str, Any], seen: Callable[[str], bool]) -> dict[str, Any]:
    """A group's detail without the topics the principal may not DESCRIBE (Kafka's
    ConsumerGroupDescribe refuses such a group outright, KAFKA-18813; the console shows
    the rest)."""
    group["subscribed_topics"] = [t for t in group["subscribed_topics"] if seen(t)]
    for m in group["members"]:
        m["subscribed_topics"] = [t for t in m["subscribed_topics"] if seen(t)]
        for key in ("assigned", "target", "pending_revocation"):
            if m[key] is not None:
                m[key] = [tp for tp in m[key] if seen(tp[0])]
    return group


def _shard_rows(kind: str, shards: dict[int, tuple[str, int]], loads: dict[int, LoadInfo],
                loaded_at: dict[int, int]) -> list[dict[str, Any]]:
    """The health of the shards of one coordinator (``kind``: Kafka's CoordinatorType name)
    this node holds, from shard index -> (status, groups or transactional ids held)."""
    rows = []
    for index, (status, count) in sorted(shards.items()):
        info = loads.get(index)
        done = loaded_at.get(index)
        rows.append({
            "type": kind, "partition": index, "status": status, "groups": count,
            "loaded_at_ms": done,
            "load_ms": None if info is None or done is None else done - info.started_ms,
            "previous_node": None if info is None or info.previous_node == info.node_id
            else info.previous_node,
            "lease_epoch": None if info is None else info.lease_epoch})
    return rows


def _takeovers(loads: dict[int, LoadInfo], loaded_at: dict[int, int]) -> list[int]:
    """When each shard this node took over from another node finished loading."""
    return [loaded_at[i] for i, info in loads.items()
            if info.previous_node is not None and info.previous_node != info.node_id
            and i in loaded_at]
