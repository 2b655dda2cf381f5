"""Cluster metadata: brokers, topics and partition leaders, refreshed with Metadata requests."""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass, field
from uuid import UUID

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from samsa.client.net import ApiKey, NetworkClient

__all__ = ["Cluster", "Metadata", "parse_bootstrap"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def parse_bootstrap(servers: str | Collection[str]) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` or a list of them -> [(host, port)]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port or 9092)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


@dataclass(frozen=True)
class Cluster:
    """One metadata snapshot."""

    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    partitions: dict[str, dict[int, int]] = field(default_factory=dict)
    """topic -> partition -> leader node id (-1 when leaderless)."""
    topic_errors: dict[str, int] = field(default_factory=dict)
    internal: frozenset[str] = frozenset()
    racks: dict[int, str] = field(default_factory=dict)
    """node id -> ``broker.rack`` (brokers without a rack are left out)."""
    replicas: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    """topic -> partition -> replica node ids."""
    topic_ids: dict[str, UUID] = field(default_factory=dict)
    """topic -> topic id (Metadata v10+; the consumer group protocol names topics by id)."""

    @property
    def topic_names(self) -> dict[UUID, str]:
        """topic id -> topic name."""
        return {tid: name for name, tid in self.topic_ids.items()}

    def leader(self, tp: TopicPartition) -> int | None:
        leader = self.partitions.get(tp.topic, {}).get(tp.partition)
        return None if leader is None or leader < 0 else leader

    def partition_count(self, topic: str) -> int | None:
        parts = self.partitions.get(topic)
        return len(parts) if parts is not None else None

    def partitions_for(self, topic: str) -> list[int]:
        return sorted(self.partitions.get(topic, {}))

    def partition_racks(self, topic: str) -> list[frozenset[str]]:
        """Racks of each partition's replicas, by partition index (Kafka's ``Node.rack``).

        Replicas on brokers without a rack (or unknown to this snapshot) add no rack.
        """
        replicas = self.replicas.get(topic, {})
        racks = self.racks
        return [
            frozenset(racks[n] for n in replicas.get(p, ()) if n in racks)
            for p in range(max(self.partitions.get(topic, {}), default=-1) + 1)
        ]


class Metadata:
    """Holds the current :class:`Cluster` and refreshes it through a :class:`NetworkClient`."""

    def __init__(self, net: NetworkClient, bootstrap: str | Collection[str],
                 retry_backoff_ms: int = 100, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.net = net
        self.clock = clock
        """The owner's clock: refresh deadlines, backoffs and waits for answers."""
        self.bootstrap = parse_bootstrap(bootstrap)
        self.retry_backoff = retry_backoff_ms / 1000
        for i, (host, port) in enumerate(self.bootstrap):
            net.set_address(("bootstrap", i), host, port)
        self.cluster = Cluster()
        self.last_refresh = 0.0

    def any_node(self) -> object:
        """A destination for requests that any broker answers."""
        if self.cluster.brokers:
            return random.choice(sorted(self.cluster.brokers))
        return ("bootstrap", random.randrange(len(self.bootstrap)))

    def refresh(self, topics: Collection[str] | None, timeout_s: float = 30.0,
                allow_auto_create: bool = True) -> Cluster:
        """Fetch metadata for ``topics`` (None: all topics); retries until ``timeout_s``
        (on :attr:`clock`)."""
        clock = self.clock
        deadline = clock.now() + timeout_s
        last: Exception | None = None
        attempt = 0
        while True:
            dests: list[object] = [self.any_node()]
            if attempt % 2 == 1 or not self.cluster.brokers:
                dests = [("bootstrap", attempt % len(self.bootstrap))]
            body = {
                "topics": None if topics is None else [{"name": t} for t in sorted(topics)],
                "allow_auto_topic_creation": allow_auto_create,
            }
            try:
                timeout = min(max(0.1, deadline - clock.now()), self.net.request_timeout)
                fut = self.net.send(dests[0], ApiKey.METADATA, body, timeout_ms=timeout * 1000)
                if not clock.wait(fut, timeout + 1):
                    raise KafkaTimeoutError(f"no metadata within {timeout + 1:.1f}s")
                self._apply(fut.result(0), topics)
                self.last_refresh = clock.now()
                return self.cluster
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as exc:
                last = exc
            attempt += 1
            if clock.now() + self.retry_backoff > deadline:
                raise KafkaTimeoutError(f"metadata refresh failed: {last}")
            clock.sleep(self.retry_backoff)

    def _apply(self, resp: object, topics: Collection[str] | None) -> None:
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in resp.brokers}  # type: ignore[attr-defined]
        racks = {int(b.node_id): b.rack for b in resp.brokers  # type: ignore[attr-defined]
                 if getattr(b, "rack", None)}
        for node, (host, port) in brokers.items():
            self.net.set_address(node, host, port)
        partitions: dict[str, dict[int, int]] = {}
        replicas: dict[str, dict[int, tuple[int, ...]]] = {}
        errors: dict[str, int] = {}
        ids: dict[str, UUID] = {}
        internal = set()
        for t in resp.topics:  # type: ignore[attr-defined]
            if t.name is None:
                continue
            if int(t.error_code):
                errors[t.name] = int(t.error_code)
                continue
            partitions[t.name] = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
            replicas[t.name] = {int(p.partition_index): tuple(int(n) for n in p.replica_nodes)
                                for p in t.partitions}
            topic_id = getattr(t, "topic_id", None)
            if topic_id is not None and topic_id.int:
                ids[t.name] = topic_id
            if t.is_internal or t.name in INTERNAL_TOPICS:
                internal.add(t.name)
        if topics is not None:
            # Keep what we knew of topics outside this request.
            for name, parts in self.cluster.partitions.items():
                if name not in partitions and name not in topics:
                    partitions[name] = parts
                    replicas[name] = self.cluster.replicas.get(name, {})
                    if name in self.cluster.topic_ids:
                        ids[name] = self.cluster.topic_ids[name]
        self.cluster = Cluster(brokers, partitions, errors, frozenset(internal), racks, replicas,
                               ids)
