"""What operators see of a share partition (metrics, ``samsa share-groups describe``, the
console): its lag (KIP-1226: the records between its start offset (SPSO) and the log end
that are not yet acknowledged or archived, as DescribeShareGroupOffsets v1 answers) and
its in-flight records by state. No Kafka API carries the record counts; samsa serves them
from the partition leader's metrics and console."""

from __future__ import annotations

from dataclasses import dataclass

from samsa.share.partition import DONE, DurableState, RecordState, SharePartition


def share_lag(state: DurableState, log_end_offset: int) -> int:
    """``state``'s lag against a log ending at ``log_end_offset`` (never negative)."""
    done = sum(1 for o, (s, _) in state.offsets.items()
               if o >= state.start_offset and s in DONE)
    return max(0, log_end_offset - state.start_offset - done)


@dataclass(frozen=True)
class SharePartitionStats:
    """One share partition for operators; the record counts are None for a partition
    whose state was read back at start but not used since (nothing is in flight)."""

    start_offset: int
    lag: int
    end_offset: int | None = None
    in_flight: int | None = None
    """Records between SPSO and SPEO, in any state."""
    available: int | None = None
    acquired: int | None = None
    acknowledged: int | None = None
    archived: int | None = None


def partition_stats(live: SharePartition | None, stored: DurableState | None,
                    log_end_offset: int) -> SharePartitionStats:
    """The stats of a live share partition, else of its stored state (one must be given)."""
    if live is None:
        assert stored is not None
        return SharePartitionStats(stored.start_offset, share_lag(stored, log_end_offset))
    return SharePartitionStats(
        live.start_offset, share_lag(live.durable(), log_end_offset), live.end_offset,
        live.end_offset - live.start_offset, live.count(RecordState.AVAILABLE),
        live.count(RecordState.ACQUIRED), live.count(RecordState.ACKNOWLEDGED),
        live.count(RecordState.ARCHIVED))
