"""What every coordinator call returns: records to append, replies to send, background jobs
to run (:mod:`.jobs`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from samsa.coordinator.jobs import Job
from samsa.coordinator.records import RecordKey, RecordValue
from samsa.coordinator.responses import Response


class Record(NamedTuple):
    """One ``__consumer_offsets`` record as a typed key and value (``None`` = tombstone),
    and the partition (shard) it must be appended to. Compared by value in tests; the
    runtime serialises it (``records.serialize``) when it appends."""

    key: RecordKey
    value: RecordValue | None
    partition: int
    #: (producer id, epoch) of a transactional record (:mod:`.txn_offsets`), else None
    producer: tuple[int, int] | None = None


@dataclass(frozen=True)
class Reply:
    """An answer to the request that was handed in with ``reply_to=token``."""

    token: object
    response: Response


@dataclass(frozen=True)
class Result:
    """Records to append (in order), replies to deliver once the append succeeded, and jobs
    to start once it succeeded (dropped with the result when it failed)."""

    records: tuple[Record, ...] = ()
    replies: tuple[Reply, ...] = ()
    jobs: tuple[Job, ...] = ()

    def __add__(self, other: Result) -> Result:
        return Result(self.records + other.records, self.replies + other.replies,
                      self.jobs + other.jobs)


EMPTY_RESULT = Result()
