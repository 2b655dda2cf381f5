"""The group side of transactions at the edge: what the transaction coordinator's edge and
the OffsetFetch handler ask of the group shards (:mod:`samsa.coordinator.txn_offsets` holds
the rules; TxnOffsetCommit itself goes through :meth:`GroupRuntime.call
<samsa.broker.groups.GroupRuntime.call>` like any group request)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.coordinator import txn_offsets

if TYPE_CHECKING:
    from samsa.broker.groups import GroupRuntime


class TxnOffsets:
    """Transactional offsets of the groups ``groups`` runs."""

    def __init__(self, groups: GroupRuntime) -> None:
        self.groups = groups

    def marker_written(self, partition: int, producer_id: int, epoch: int,
                       commit: bool) -> None:
        """A transaction marker was appended to ``__consumer_offsets`` ``partition``: the
        producer's staged offsets there are committed or dropped."""
        coordinator = self.groups.coordinator
        shard = None if coordinator is None else coordinator.shards.get(partition)
        if shard is not None:
            txn_offsets.complete(shard, producer_id, epoch, commit)

    def unstable(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of ``group_id`` with offsets an open transaction staged."""
        coordinator = self.groups.coordinator
        shard = None if coordinator is None else coordinator.shard_for(group_id)
        return set() if shard is None else txn_offsets.unstable_partitions(shard, group_id)
