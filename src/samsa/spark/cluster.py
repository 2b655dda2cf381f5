"""Driver-side view of the cluster: partitions of the topic selection, offset lookups, and
the optional consumer-group commit (through ``samsa.Admin``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from samsa import TopicPartition
from samsa.client.admin import Admin
from samsa.client.errors import KafkaError
from samsa.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    SourceOptions,
    client_settings,
)

__all__ = ["Cluster"]

log = logging.getLogger(__name__)


def _names(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps)) or "none"


class Cluster:
    """Lookups for one source (lazy connection; not picklable, keep it on the driver)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.admin = Admin(opts.bootstrap, request_timeout_ms=opts.request_timeout_ms,
                           **client_settings(opts.security))

    def close(self) -> None:
        self.admin.close()

    def partitions(self) -> set[TopicPartition]:
        """Current partitions of the topic selection (topics that do not exist: none)."""
        topics = self.admin.list_topics()
        o = self.opts
        if o.selector == "assign":
            return {tp for tp in o.assigned if tp.partition < topics.get(tp.topic, 0)}
        return {TopicPartition(t, p) for t, n in topics.items() if o.matches(t)
                for p in range(n)}

    def offsets(self, tps: Iterable[TopicPartition], what: int) -> dict[TopicPartition, int]:
        """``what`` -2 earliest, -1 latest (read_committed: the last stable offset), else
        the first offset at or after that time (ms).

        A timestamp later than every record resolves to the latest offset.
        """
        tps = set(tps)
        if not tps:
            return {}
        try:
            found = self.admin.list_offsets(dict.fromkeys(tps, what),
                                            read_committed=self.opts.read_committed)
        except KafkaError:
            # A topic deleted since the partitions were listed: look up the others.
            gone = tps - self.partitions()
            if not gone:
                raise
            log.warning("partitions %s disappeared", _names(gone))
            return self.offsets(tps - gone, what)
        out = {tp: off for tp, (off, _) in found.items()}
        missing = [tp for tp in tps if out.get(tp, -1) < 0]
        if missing:
            out.update(self.offsets(missing, LATEST) if what != LATEST else {})
        return out

    def resolve(self, spec: OffsetSpec, tps: set[TopicPartition],
                option: str) -> dict[TopicPartition, int]:
        """Offsets of ``tps`` for a ``startingOffsets`` / ``endingOffsets`` style spec."""
        if spec.kind == "earliest":
            return self.offsets(tps, EARLIEST)
        if spec.kind == "latest":
            return self.offsets(tps, LATEST)
        if spec.kind == "timestamp":
            return self.offsets(tps, spec.timestamp)
        given = dict(spec.offsets)
        if set(given) != tps:
            raise OptionError(
                f"option {option} must name every partition of the query (-2 earliest, -1 "
                f"latest): given {_names(given)}; the query reads {_names(tps)}")
        if spec.kind == "timestamps":
            out: dict[TopicPartition, int] = {}
            for ts in set(given.values()):
                out.update(self.offsets([tp for tp, t in given.items() if t == ts], ts))
            return out
        out = {tp: off for tp, off in given.items() if off >= 0}
        out.update(self.offsets([tp for tp, off in given.items() if off == EARLIEST], EARLIEST))
        out.update(self.offsets([tp for tp, off in given.items() if off == LATEST], LATEST))
        return out

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group_id`` (for lag monitoring; failures are logged)."""
        try:
            self.admin.alter_consumer_group_offsets(
                group_id, {tp: off for tp, off in offsets.items() if off >= 0})
        except Exception as exc:  # the checkpoint is the source of truth
            log.warning("committing offsets of group %s failed: %s", group_id, exc)
