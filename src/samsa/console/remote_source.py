"""The console against any Kafka-compatible cluster (``samsa console --bootstrap-server``).

Everything comes through the Kafka protocol with samsa's client: ListGroups on every
broker, DescribeGroups / ConsumerGroupDescribe, OffsetFetch, ListOffsets,
DescribeShareGroupOffsets (a share group's start offsets and lag), and a Fetch of
the first unconsumed record of each lagging partition for its timestamp (the lag in
seconds). A broker does not tell group histories, members' session clocks or its
coordinator shards over the protocol, so those panels are off here.

It acts with the credentials of its client settings (``samsa console --command-config``:
``security.protocol``, ``sasl.*``, ``ssl.*``), so the cluster's ACLs decide what it lists
(ListGroups, Metadata and OffsetFetch answer only what the principal may DESCRIBE) and
what it may do.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from samsa import TopicPartition
from samsa.client.errors import AuthorizationError, KafkaError, error_for
from samsa.console import views
from samsa.console.lag import LagSample
from samsa.console.source import ActionError, ConsoleOptions, Source, now_ms

#: group types whose groups and members have epochs (KIP-848 consumer, KIP-932 share)
_MODERN = ("consumer", "share")
#: group types described for the group list (a streams group is shown as listed)
_DESCRIBED = ("classic", *_MODERN)
#: how long a sample waits for the timestamps of lagging partitions
_FETCH_WAIT_S = 1.0


class RemoteSource(Source):
    kind = "cluster"

    def __init__(self, bootstrap: str, options: ConsoleOptions, timeout_ms: int = 10_000) -> None:
        super().__init__(options)
        self.bootstrap = bootstrap
        self.timeout_ms = timeout_ms
        self._admin: Any = None
        self._fetcher = TimestampFetcher(bootstrap, timeout_ms, options.client_config)
        self._listing: list[dict[str, Any]] = []
        self._coordinators: dict[str, int] = {}

    @property
    def features(self) -> dict[str, bool]:
        return {**super().features, "share_groups": True}

    def admin(self) -> Any:
        if self._admin is None:
            from samsa.client import Admin

            self._admin = Admin(self.bootstrap, client_id="samsa-console",
                                request_timeout_ms=self.timeout_ms,
                                **dict(self.options.client_config))
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
        self._fetcher.close()
        super().close()

    # ------------------------------------------------------------------ groups

    async def groups(self) -> list[dict[str, Any]]:
        if not self._listing:
            await self.sample()
        now = now_ms()
        return [{**row, "lag": views.totals(row["group_id"], self.tracker, now)}
                for row in self._listing]

    async def group(self, group_id: str) -> dict[str, Any] | None:
        try:
            return await self.blocking(self._describe, group_id)
        except AuthorizationError as exc:
            raise ActionError(403, f"{self.options.principal} is not authorized to DESCRIBE "
                                   f"group {group_id} ({exc})") from None
        except KafkaError as exc:
            raise ActionError(502, str(exc)) from None

    def _describe(self, group_id: str) -> dict[str, Any] | None:
        admin = self.admin()
        desc = admin.describe_groups([group_id])[group_id]
        if desc.error_code:
            raise error_for(desc.error_code, f"describe group {group_id}")
        if desc.state == "Dead" and not desc.members:
            return None
        modern = desc.group_type in _MODERN
        node = self._coordinators.get(group_id)
        if node is None:
            node = self._coordinators[group_id] = admin.find_coordinator(group_id)[0]
        members = [{
            "member_id": m.member_id, "instance_id": m.group_instance_id,
            "client_id": m.client_id, "client_host": m.client_host, "rack_id": None,
            "protocol": desc.group_type if modern else "classic",
            "protocols": [desc.protocol] if desc.protocol else [],
            "subscribed_topics": list(m.topics), "subscribed_regex": None,
            "member_epoch": m.member_epoch if modern else None, "state": None,
            "is_leader": False,
            "assigned": [[tp.topic, tp.partition] for tp in m.assignment],
            "target": None if m.target_assignment is None else
            [[tp.topic, tp.partition] for tp in m.target_assignment],
            "pending_revocation": [],
            "liveness": None} for m in desc.members]
        return {
            "group_id": group_id, "group_type": desc.group_type, "state": desc.state,
            "protocol_type": desc.protocol_type, "protocol": desc.protocol, "leader": None,
            "generation": None, "group_epoch": desc.group_epoch if modern else None,
            "assignment_epoch": desc.assignment_epoch if modern else None,
            "coordinator": {"node_id": node, "partition": None},
            "subscribed_topics": sorted({t for m in desc.members for t in m.topics}),
            "rebalance_deadline_in_ms": None, "rebalance_deadline_kind": None,
            "members": members}

    async def share_partitions(self, group_id: str) -> list[dict[str, Any]] | None:
        """A share group's start offsets and lag (DescribeShareGroupOffsets); a cluster
        tells no in-flight record counts."""
        return await self.blocking(self._share_partitions, group_id)

    def _share_partitions(self, group_id: str) -> list[dict[str, Any]] | None:
        try:
            found = self.admin().describe_share_group_offsets(group_id)
        except AuthorizationError as exc:
            raise ActionError(403, str(exc)) from None
        except KafkaError:  # not a share group, or no share groups on this cluster
            return None
        return [views.share_partition_json(tp.topic, tp.partition, None,
                                           o.start_offset, o.lag)
                for tp, o in found.items()]

    # ------------------------------------------------------------------ lag

    async def sample(self) -> None:
        listing, samples = await self.blocking(self._sample)
        now = now_ms()
        self._listing = listing
        for gid, group_samples in samples.items():
            for sample in group_samples:
                self.tracker.observe(gid, sample, now)
            self.tracker.retain(gid, {(s.topic, s.partition) for s in group_samples})
        self.tracker.forget_others(set(samples))

    def _sample(self) -> tuple[list[dict[str, Any]], dict[str, list[LagSample]]]:
        admin = self.admin()
        listing, committed_of = [], {}
        for g in admin.list_group_listings():
            self._coordinators[g.group_id] = g.coordinator
            row = {"group_id": g.group_id, "group_type": g.group_type, "state": g.state,
                   "protocol_type": g.protocol_type, "protocol": "", "members": None,
                   "epoch": None, "coordinator": {"node_id": g.coordinator, "partition": None},
                   "last_rebalance": None}
            try:
                # a share group commits no offsets (OffsetFetch: GROUP_ID_NOT_FOUND)
                committed = ({} if g.group_type == "share"
                             else admin.list_consumer_group_offsets(g.group_id))
                if g.group_type in _DESCRIBED:  # streams: as listed
                    desc = admin.describe_groups([g.group_id])[g.group_id]
                    row.update(state=desc.state or g.state, protocol=desc.protocol,
                               members=len(desc.members), epoch=desc.group_epoch
                               if desc.group_type in _MODERN else None)
            except Exception:  # gone meanwhile, or not a group this client can read
                continue
            committed_of[g.group_id] = committed
            listing.append(row)
        samples = lag_samples(admin, self._fetcher, committed_of)
        return listing, samples


def lag_samples(admin: Any, fetcher: TimestampFetcher,
                committed_of: dict[str, dict[TopicPartition, int]]) -> dict[str, list[LagSample]]:
    """Each group's lag per committed partition, from ListOffsets and the timestamps of
    the first unconsumed records."""
    tps = sorted({tp for c in committed_of.values() for tp in c})
    existing = admin.list_topics()
    tps = [tp for tp in tps if tp.partition < existing.get(tp.topic, 0)]
    starts = {tp: o for tp, (o, _) in admin.list_offsets(
        dict.fromkeys(tps, "earliest")).items()} if tps else {}
    ends = {tp: o for tp, (o, _) in admin.list_offsets(
        dict.fromkeys(tps, "latest")).items()} if tps else {}
    wanted = {tp: max(off, starts[tp]) for c in committed_of.values()
              for tp, off in c.items() if tp in ends and max(off, starts[tp]) < ends[tp]}
    stamps = fetcher.timestamps(wanted)
    now = now_ms()
    samples: dict[str, list[LagSample]] = {}
    for gid, committed in committed_of.items():
        out = []
        for tp, off in sorted(committed.items()):
            if tp not in ends:
                continue
            start, end = starts[tp], ends[tp]
            first = max(off, start)
            ts = stamps.get((tp, first))
            seconds = 0.0 if first >= end else (None if ts is None else max(now - ts, 0) / 1000)
            phantom = max(start - off, 0)
            out.append(LagSample(tp.topic, tp.partition, off, start, end, seconds, phantom,
                                 "retention" if phantom else None, None))
        samples[gid] = out
    return samples


class TimestampFetcher:
    """Reads the timestamp of the record at given offsets (a consumer without a group;
    ``client_config``: its TLS and SASL settings)."""

    def __init__(self, bootstrap: str, timeout_ms: int,
                 client_config: Mapping[str, Any] | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeout_ms = timeout_ms
        self.client_config = dict(client_config or {})
        self._consumer: Any = None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()

    def timestamps(self, wanted: dict[TopicPartition, int]
                   ) -> dict[tuple[TopicPartition, int], int]:
        if not wanted:
            return {}
        from samsa.client import Consumer

        if self._consumer is None:
            self._consumer = Consumer(bootstrap_servers=self.bootstrap,
                                      client_id="samsa-console-lag", enable_auto_commit=False,
                                      request_timeout_ms=self.timeout_ms, **self.client_config)
        consumer = self._consumer
        consumer.assign(list(wanted))
        for tp, off in wanted.items():
            consumer.seek(tp, off)
        found: dict[tuple[TopicPartition, int], int] = {}
        deadline = time.monotonic() + _FETCH_WAIT_S
        while len(found) < len(wanted) and time.monotonic() < deadline:
            for r in consumer.poll(timeout_ms=200):
                tp = TopicPartition(r.topic, r.partition)
                if tp in wanted and (tp, wanted[tp]) not in found and r.offset >= wanted[tp]:
                    found[(tp, wanted[tp])] = r.timestamp
                    consumer.pause(tp)
        consumer.resume(*wanted)
        return found
