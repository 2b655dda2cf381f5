"""Cluster metadata: brokers, topics and partition leaders, refreshed with Metadata requests."""

from __future__ import annotations

import collections
import math
import random
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import AuthenticationError, KafkaError, KafkaTimeoutError
from samsa.client.future import Future
from samsa.client.net import ApiKey, NetworkClient

__all__ = ["Cluster", "Metadata", "parse_bootstrap"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.topic_authorization_failed)


def parse_bootstrap(servers: str | Collection[str]) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` or a list of them -> [(host, port)]."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if port and not port.isdigit():
            raise ValueError(f"bootstrap_servers: {item!r} is not host:port")
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

    def unauthorized(self, topics: Collection[str]) -> set[str]:
        """The topics among ``topics`` this snapshot answered TOPIC_AUTHORIZATION_FAILED
        (the principal may not DESCRIBE them)."""
        errors = self.topic_errors
        return {t for t in topics if errors.get(t) == _TOPIC_AUTHORIZATION_FAILED}

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
    """Holds the current :class:`Cluster` and refreshes it through a :class:`NetworkClient`
    (closed when ``bootstrap`` cannot be parsed: the client being built fails)."""

    def __init__(self, net: NetworkClient, bootstrap: str | Collection[str],
                 retry_backoff_ms: int = 100, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.net = net
        self.clock = clock
        """The owner's clock: refresh deadlines, backoffs and waits for answers."""
        try:
            self.bootstrap = parse_bootstrap(bootstrap)
        except ValueError:
            net.close()  # the client being built fails: stop its network thread and sockets
            raise
        self.retry_backoff = retry_backoff_ms / 1000
        for i, (host, port) in enumerate(self.bootstrap):
            net.set_address(("bootstrap", i), host, port)
        self.cluster = Cluster()
        self.last_refresh = 0.0

    def nodes(self) -> list[object]:
        """Known destinations: the cluster's brokers, then bootstrap servers at an address no
        known broker has (all of them until the first refresh)."""
        known = set(self.cluster.brokers.values())
        return [*sorted(self.cluster.brokers),
                *(("bootstrap", i) for i, addr in enumerate(self.bootstrap) if addr not in known)]

    def ranked_nodes(self, tried: Mapping[object, int] | None = None) -> list[object]:
        """:meth:`nodes`, best first, after Kafka's ``NetworkClient.leastLoadedNode``.

        In order: fewest attempts in ``tried`` (one refresh goes round the nodes); nodes with
        no request in flight (a hung node holds its unanswered ones until they time out); the
        least recent connection failure (never failed first: Kafka likewise skips nodes in
        reconnect backoff and then prefers the least recent connection attempt); at random
        among equals (Kafka starts its scan at a random offset).
        """
        tried = tried or {}
        net = self.net

        def rank(node: object) -> tuple[int, bool, float, float]:
            failed = net.last_failure(node)
            return (tried.get(node, 0), net.in_flight(node) > 0,
                    -math.inf if failed is None else failed, random.random())

        return sorted(self.nodes(), key=rank)

    def any_node(self) -> object:
        """A destination for requests that any broker answers: the best of
        :meth:`ranked_nodes`."""
        return self.ranked_nodes()[0]

    def refresh(self, topics: Collection[str] | None, timeout_s: float = 30.0,
                allow_auto_create: bool = True) -> Cluster:
        """Fetch metadata for ``topics`` (None: all topics) within ``timeout_s`` (on
        :attr:`clock`), trying nodes in :meth:`ranked_nodes` order.

        A request may run for the client's request timeout, as in Kafka, but one node that
        hangs does not take the whole refresh: once the newest request has gone unanswered
        for ``min(request timeout, timeout_s / 2)``, it is left running and the request also
        goes to the next node; the first answer wins. That gives every refresh at least two
        nodes inside its deadline, as Kafka's blocking calls get from
        ``default.api.timeout.ms`` (60 s) being twice ``request.timeout.ms`` (30 s), where
        Kafka's timed-out node is then disconnected and ranked last. A request that fails
        (refused, reset, an error) or times out moves on after ``retry_backoff``; once the
        client is closed, the refresh fails at once.
        """
        clock = self.clock
        deadline = clock.now() + timeout_s
        patience = min(self.net.request_timeout, timeout_s / 2)
        body = {
            "topics": None if topics is None else [{"name": t} for t in sorted(topics)],
            "allow_auto_topic_creation": allow_auto_create,
        }
        answered = threading.Event()
        waiting: list[tuple[object, Future[Any], float, float]] = []  # node, answer, timeout, sent
        tried: collections.Counter[object] = collections.Counter()
        last: BaseException | None = None
        next_at = -math.inf  # when the next node is due while others' answers are awaited
        newest: object = None
        while True:
            now = clock.now()
            spare = [n for n in self.ranked_nodes(tried) if n not in {w[0] for w in waiting}]
            due = not waiting or now >= next_at
            if spare and due and (now < deadline or not tried):
                node, spare = spare[0], spare[1:]
                timeout = min(max(0.1, deadline - now), self.net.request_timeout)
                fut = self.net.send(node, ApiKey.METADATA, body, timeout_ms=timeout * 1000)
                fut.add_done_callback(lambda _: answered.set())
                waiting.append((node, fut, timeout, now))
                tried[node] += 1
                newest, next_at = node, now + patience
            answered.clear()  # answers from here on wake the wait below
            for entry in list(waiting):
                node, fut, timeout, sent = entry
                if fut.succeeded():
                    self._apply(fut.value, topics)
                    self.last_refresh = clock.now()
                    return self.cluster
                exc = fut.exception()
                if exc is not None and (not isinstance(exc, KafkaError)
                                        or isinstance(exc, AuthenticationError)
                                        or self.net.closed):
                    raise exc  # a bug, credentials or a closed client: no retry will help
                # a second past the request's own timeout: the network thread enforces that
                if exc is not None or now >= sent + timeout + 1:
                    waiting.remove(entry)
                    last = exc or KafkaTimeoutError(
                        f"no metadata from {node!r} within {timeout + 1:.1f}s")
                    if node == newest:
                        next_at = now + self.retry_backoff
            now = clock.now()
            if not waiting:
                if now + self.retry_backoff > deadline:
                    raise KafkaTimeoutError(f"metadata refresh failed: {last}")
                clock.sleep(self.retry_backoff)
                continue
            if now >= deadline:
                nodes = ", ".join(repr(w[0]) for w in waiting)
                raise KafkaTimeoutError(f"metadata refresh failed: no answer from {nodes}"
                                        + (f"; earlier: {last}" if last else ""))
            until = min(deadline, *(sent + timeout + 1 for _, _, timeout, sent in waiting))
            if spare:
                until = min(until, next_at)
            clock.wait(answered, max(0.0, until - now))

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
