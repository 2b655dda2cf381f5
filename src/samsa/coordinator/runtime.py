"""The shard runtime: loading, unloading and writing a node's coordinator shards, sans I/O.

As Kafka's ``CoordinatorRuntime`` reaches storage through a ``PartitionWriter`` and a
``CoordinatorLoader`` only, :class:`ShardRuntime` reaches it through a :class:`ShardWriter`
(append a result's records, the lease epoch it writes under) and the records its driver
reads for a load. It holds the rules; the driver holds the I/O and the waiting. Three drivers
run it: the broker's asyncio edges of the group coordinator (:mod:`samsa.broker.groups`) and
of the transaction coordinator (:mod:`samsa.broker.transactions`), and the seeded failover
simulation (``tests/coordinator/failover_simulation.py``).

* **Ownership.** :meth:`ShardRuntime.gain` begins a load (an older copy of the shard is
  unloaded first): the shard answers COORDINATOR_LOAD_IN_PROGRESS until the driver hands
  the partition's records to :meth:`ShardRuntime.finish`, which replays them unless the load
  was superseded meanwhile (:meth:`ShardRuntime.current`: the shard was replaced or
  unloaded, or the lease epoch moved). :meth:`ShardRuntime.lose` unloads: parked requests
  get NOT_COORDINATOR, the shard's timers stop.
* **Writing.** :meth:`ShardRuntime.write` appends a result's records, one batch per shard,
  and returns what must become durable before its replies go out
  (:meth:`ShardRuntime.deliver`). When an append or its durability fails,
  :meth:`ShardRuntime.failed` unloads the touched shards, fails every reply of the lost
  result (its request is answered COORDINATOR_NOT_AVAILABLE) and begins a reload of each
  shard this node still holds: the log is the only truth, nothing is reverted by hand.
* **Confirming.** Before a KIP-848 member is told its group is gone (:func:`must_confirm`),
  the driver confirms the lease with the source of truth; a node that lost it gives the
  shard up (:meth:`ShardRuntime.lose`) and answers NOT_COORDINATOR.

The runtime is generic over the coordinator it runs (:class:`Shards`): the group coordinator
(:class:`~samsa.coordinator.manager.Coordinator` on ``__consumer_offsets``) and the
transaction coordinator (:class:`~samsa.transactions.coordinator.TxnCoordinator` on
``__transaction_state``, driven by :mod:`samsa.broker.transactions`) share these rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from samsa.coordinator.events import ConsumerGroupHeartbeat, Event
from samsa.coordinator.history.model import LoadInfo
from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse, Response

__all__ = ["Load", "Replies", "ShardRuntime", "ShardWriter", "Shards", "must_confirm"]


class Loadable(Protocol):
    """A shard being loaded: it replays its partition's records."""

    def replay(self, key: Any, value: Any) -> None: ...


class Placed(Protocol):
    """A record of a result: the shard (partition) it goes to."""

    @property
    def partition(self) -> int: ...


class ShardResult(Protocol):
    """What a coordinator call returns: records to append, then replies to deliver."""

    @property
    def records(self) -> Sequence[Placed]: ...

    @property
    def replies(self) -> Sequence[Any]: ...


S = TypeVar("S", bound=Loadable)
R = TypeVar("R", bound=ShardResult)
S_co = TypeVar("S_co", bound=Loadable, covariant=True)
R_co = TypeVar("R_co", bound=ShardResult, covariant=True)


class Shards(Protocol[S_co, R_co]):
    """A coordinator made of shards, one per partition of its topic."""

    @property
    def shards(self) -> Mapping[int, S_co]: ...

    def begin_load(self, partition: int) -> S_co:
        """A new shard for ``partition`` (an older one is dropped), loading."""

    def finish_load(self, partition: int, now_ms: int, info: LoadInfo | None = None) -> R_co:
        """The shard has replayed its records: activate it."""

    def unload(self, partition: int) -> R_co:
        """Drop the shard; what its parked requests are answered."""


class ShardWriter(Protocol):
    """Where a node's shards are written (the partitions of the coordinator's topic)."""

    def append(self, partition: int, records: Sequence[Any], now_ms: int) -> int:
        """Append ``records`` to ``partition`` (raises on failure: nothing may be assumed
        written); the offset below which they are, once durable."""

    def epoch(self, partition: int) -> int | None:
        """The lease epoch this node writes ``partition`` under; None when it does not hold
        the partition (any more)."""


class Replies(Protocol):
    """Where answers go (futures on the broker, the network in the simulation)."""

    def deliver(self, reply: Any) -> None:
        """Answer ``reply.token``'s request with ``reply.response`` (unless answered)."""

    def fail(self, reply: Any) -> None:
        """The records behind ``reply`` were lost: its request gets
        COORDINATOR_NOT_AVAILABLE (unless answered)."""


@dataclass(eq=False, slots=True)
class Load(Generic[S]):
    """One load of a shard in progress."""

    partition: int
    shard: S
    epoch: int | None
    """The lease epoch when it began (a load under another epoch is stale)."""
    info: LoadInfo


@dataclass(eq=False)
class ShardRuntime(Generic[S, R]):
    """Runs ``coordinator``'s shards on ``writer`` for node ``node_id``."""

    coordinator: Shards[S, R]
    writer: ShardWriter
    replies: Replies
    node_id: int = -1
    #: shard -> its last finished load and when it finished (the console's health panel)
    loads: dict[int, LoadInfo] = field(default_factory=dict)
    loaded_at: dict[int, int] = field(default_factory=dict)

    # -- ownership ----------------------------------------------------------------------------
    def gain(self, partition: int, now_ms: int, previous_node: int | None = None,
             lease_epoch: int | None = None) -> Load[S]:
        """Begin loading ``partition`` (taken from ``previous_node`` under ``lease_epoch``,
        for the history); the driver reads its records and calls :meth:`finish`."""
        self.lose(partition)
        shard = self.coordinator.begin_load(partition)
        info = LoadInfo(now_ms, self.node_id, previous_node, lease_epoch)
        return Load(partition, shard, self.writer.epoch(partition), info)

    def current(self, load: Load[S]) -> bool:
        """Whether ``load`` still matters: its shard is the one loading here, under the
        same lease epoch."""
        return (self.coordinator.shards.get(load.partition) is load.shard
                and self.writer.epoch(load.partition) == load.epoch)

    def finish(self, load: Load[S], records: Iterable[tuple[Any, Any]],
               now_ms: int) -> R | None:
        """Replay ``records`` (the partition's, in log order) into ``load``'s shard and
        activate it; the result to write (like a request's). None if the load was
        superseded: nothing happens."""
        if not self.current(load):
            return None
        shard = load.shard
        for key, value in records:
            shard.replay(key, value)
        result = self.coordinator.finish_load(load.partition, now_ms, load.info)
        self.loads[load.partition], self.loaded_at[load.partition] = load.info, now_ms
        return result

    def lose(self, partition: int) -> None:
        """Unload ``partition``: parked requests get NOT_COORDINATOR, its timers stop."""
        if partition in self.coordinator.shards:
            self.deliver(self.coordinator.unload(partition))

    # -- writing ------------------------------------------------------------------------------
    def write(self, result: R, now_ms: int) -> list[tuple[int, int]]:
        """Append ``result``'s records, one batch per shard in the order the shards first
        appear; the (partition, offset) pairs to wait durable for. Raises what the writer
        raised: then call :meth:`failed`."""
        by_partition: dict[int, list[Placed]] = {}
        for r in result.records:
            by_partition.setdefault(r.partition, []).append(r)
        return [(p, self.writer.append(p, recs, now_ms)) for p, recs in by_partition.items()]

    def deliver(self, result: R) -> None:
        """Every reply of ``result`` (its records, if any, are durable)."""
        for reply in result.replies:
            self.replies.deliver(reply)

    def failed(self, partitions: Iterable[int], result: R, now_ms: int) -> list[Load[S]]:
        """``result``'s records could not be written (or made durable): unload ``partitions``,
        fail its replies, and begin loading again each shard this node still holds (the
        loads the driver must run)."""
        touched = list(dict.fromkeys(partitions))
        for p in touched:
            self.lose(p)
        for reply in result.replies:
            self.replies.fail(reply)
        loads = []
        for p in touched:
            if self.writer.epoch(p) is not None:
                prior = self.loads.get(p)
                loads.append(self.gain(p, now_ms, None,
                                       None if prior is None else prior.lease_epoch))
        return loads


def partitions_of(result: ShardResult) -> list[int]:
    """The shards ``result`` writes to, in order."""
    return list(dict.fromkeys(r.partition for r in result.records))


def must_confirm(event: Event, response: Response) -> bool:
    """A KIP-848 member is about to be told its group is gone (fatal for librdkafka and the
    Java client): the driver confirms the lease first."""
    return (isinstance(event, ConsumerGroupHeartbeat)
            and isinstance(response, ConsumerGroupHeartbeatResponse)
            and response.error_code == ErrorCode.group_id_not_found)
