"""Offsets staged by open transactions in one shard (see :mod:`.txn_offsets`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.coordinator.records import OffsetCommitKey, OffsetCommitValue

__all__ = ["PendingTxnOffsets"]

TopicPartition = tuple[str, int]


@dataclass
class PendingTxnOffsets:
    """Offsets staged by open transactions, and the last epoch seen per producer id."""

    #: producer id -> group -> partition -> offset
    staged: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = field(
        default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)

    def stage(self, producer_id: int, epoch: int, key: OffsetCommitKey,
              value: OffsetCommitValue | None) -> None:
        self.epochs[producer_id] = max(epoch, self.epochs.get(producer_id, epoch))
        if value is not None:
            groups = self.staged.setdefault(producer_id, {})
            groups.setdefault(key.group, {})[(key.topic, key.partition)] = value

    def end(self, producer_id: int, epoch: int
            ) -> dict[str, dict[TopicPartition, OffsetCommitValue]]:
        """The producer's marker: its staged offsets, forgotten here."""
        self.epochs[producer_id] = max(epoch, self.epochs.get(producer_id, epoch))
        return self.staged.pop(producer_id, {})
