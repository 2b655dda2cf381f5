"""Transactional offset commits (KIP-98, KIP-447): the group side of exactly-once.

TxnOffsetCommit stages a producer's offsets in the group's shard: each is written to
``__consumer_offsets`` as an offset-commit record in a transactional batch of the producer
(:class:`~samsa.coordinator.result.Record` ``producer``), held as pending, and becomes the
group's committed offset only when the transaction's commit marker reaches the partition
(:func:`complete`); an abort marker drops it. A load replays the same way
(:class:`Replayer`: records buffered per producer until their marker; those still open at
the end stay pending).

Fencing: a producer epoch older than the last one the shard saw for the producer id is
PRODUCER_FENCED; the group checks the committer as an OffsetCommit would, except that a
commit without group metadata (generation -1, no member: TxnOffsetCommit v0-2) is accepted:
each group by its own ``validate_offset_commit`` as OffsetCommit (classic groups: member id,
instance id, generation, the group's state; consumer groups: member epoch, STALE_MEMBER_EPOCH
with KIP-1251's assignment epochs for partitions).

The pending offsets live in :attr:`HardState.pending_txn
<samsa.coordinator.core.HardState.pending_txn>`; OffsetFetch with ``require_stable`` asks
:func:`unstable_partitions`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from samsa.coordinator import offsets
from samsa.coordinator import rebalance as rb
from samsa.coordinator.core import ShardCore, TopicPartition
from samsa.coordinator.events import NO_MEMBER_ID, TxnOffsetCommit
from samsa.coordinator.records import OffsetCommitKey, OffsetCommitValue, RecordKey, RecordValue
from samsa.coordinator.responses import OffsetCommitResponse, PartitionError, TopicErrors
from samsa.coordinator.result import Record
from samsa.coordinator.txn_pending import PendingTxnOffsets

__all__ = ["Replayer", "complete", "handle_commit", "unstable_partitions"]

E = ErrorCode


def handle_commit(core: ShardCore, ev: TxnOffsetCommit, token: object) -> None:
    """Validate, then stage every partition's offset under the producer."""
    pending = core.hard.pending_txn
    known = pending.epochs.get(ev.producer_id)
    error = E.producer_fenced if known is not None and ev.producer_epoch < known \
        else _validate(core, ev)
    max_metadata = core.config.offset_metadata_max_bytes

    def answer(topic: str, partition: int, offset: int, leader_epoch: int,
               metadata: str | None) -> int:
        if error is not None:
            return error
        if offsets.java_length(metadata or "") > max_metadata:
            return E.offset_metadata_too_large
        key = OffsetCommitKey(ev.group_id, topic, partition)
        value = OffsetCommitValue(offset, leader_epoch, metadata or "", core.now_ms, -1)
        core.write_record(Record(key, value, core.partition,
                                 (ev.producer_id, ev.producer_epoch)))
        pending.stage(ev.producer_id, ev.producer_epoch, key, value)
        return E.none

    core.reply(token, OffsetCommitResponse(tuple(
        TopicErrors(t.name, tuple(
            PartitionError(p.partition, answer(t.name, p.partition, p.offset, p.leader_epoch,
                                               p.metadata))
            for p in t.partitions))
        for t in ev.topics)))


def _validate(core: ShardCore, ev: TxnOffsetCommit) -> int | None:
    """The group's own check (:meth:`Group.validate_offset_commit
    <samsa.coordinator.family.Group.validate_offset_commit>`, no version floor)."""
    if ev.generation_id < 0 and ev.member_id == NO_MEMBER_ID and ev.group_instance_id is None:
        return None  # no group metadata (v0-2, or a producer outside the group)
    found = core.find_group(ev.group_id)
    if found is None:
        return E.illegal_generation if ev.generation_id >= 0 else E.unknown_member_id
    _, group = found
    by_name = core.topics.by_name
    check = group.validate_offset_commit(ev.member_id, ev.group_instance_id,
                                         ev.generation_id, None)
    return check.first_error(
        (None if (info := by_name.get(t.name)) is None else info.topic_id, p.partition)
        for t in ev.topics for p in t.partitions)


def complete(core: ShardCore, producer_id: int, epoch: int, commit: bool) -> None:
    """The producer's transaction marker reached this shard's partition: its offsets become
    the groups' committed offsets (commit) or are dropped (abort). The marker in the log is
    the record; the state follows it as a replay would."""
    for group, staged in core.hard.pending_txn.end(producer_id, epoch).items():
        if commit:
            for (topic, partition), value in staged.items():
                core.hard.replay(OffsetCommitKey(group, topic, partition), value)
            if core.find_group(group) is None:
                rb.create_group(core, group)  # a "simple" group, as a load would build it


def unstable_partitions(core: ShardCore, group_id: str) -> set[TopicPartition]:
    """The partitions of ``group_id`` with offsets staged by an open transaction."""
    out: set[TopicPartition] = set()
    for groups in core.hard.pending_txn.staged.values():
        out.update(groups.get(group_id, {}))
    return out


@dataclass
class Replayer:
    """A load's view of transactional records: buffered per producer until its marker (a
    commit yields them where the marker stands, an abort drops them); :meth:`restore` hands
    the shard those still open at the end of the log."""

    pending: PendingTxnOffsets = field(default_factory=PendingTxnOffsets)

    def record(self, producer: tuple[int, int] | None, key: RecordKey,
               value: RecordValue | None) -> Iterator[tuple[RecordKey, RecordValue | None]]:
        if producer is not None and isinstance(key, OffsetCommitKey) and (
                value is None or isinstance(value, OffsetCommitValue)):
            self.pending.stage(producer[0], producer[1], key, value)
            return
        yield key, value

    def marker(self, producer_id: int, epoch: int, commit: bool
               ) -> Iterator[tuple[RecordKey, RecordValue | None]]:
        for group, staged in self.pending.end(producer_id, epoch).items():
            if commit:
                for (topic, partition), value in staged.items():
                    yield OffsetCommitKey(group, topic, partition), value

    def restore(self, core: ShardCore) -> None:
        core.hard.pending_txn = self.pending

