"""ListOffsets lookups shared by the consumer (offset reset, seek_to_*) and the admin."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import (
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationError,
    error_for,
)
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey

__all__ = ["EARLIEST", "LATEST", "list_offsets"]

EARLIEST = -2
LATEST = -1
_RETRIABLE_METADATA = frozenset({
    ErrorCode.unknown_topic_or_partition, ErrorCode.leader_not_available,
    ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch})


def list_offsets(metadata: Metadata, timestamps: Mapping[TopicPartition, int],
                 timeout_s: float = 30.0, *, allow_auto_create: bool = True
                 ) -> dict[TopicPartition, tuple[int, int]]:
    """Offset lookup per partition: ``timestamp`` -2 earliest, -1 latest, else by time.

    Returns tp -> (offset, timestamp); offset is -1 when no record is that recent.
    Deadline, pauses and waits for answers are on ``metadata.clock`` (its owner's).
    """
    clock = metadata.clock
    deadline = clock.now() + timeout_s
    todo = dict(timestamps)
    out: dict[TopicPartition, tuple[int, int]] = {}
    while todo:
        cluster = metadata.cluster
        by_node: dict[int, dict[TopicPartition, int]] = defaultdict(dict)
        unknown = []
        for tp, ts in todo.items():
            leader = cluster.leader(tp)
            if leader is None:
                unknown.append(tp)
            else:
                by_node[leader][tp] = ts
        futures = []
        for node, tps in by_node.items():
            topics: dict[str, list[dict[str, int]]] = defaultdict(list)
            for tp, ts in tps.items():
                topics[tp.topic].append({"partition_index": tp.partition, "timestamp": ts,
                                         "current_leader_epoch": -1})
            body = {"replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            futures.append(metadata.net.send(node, ApiKey.LIST_OFFSETS, body))
        denied = cluster.unauthorized({tp.topic for tp in unknown})
        if denied:
            raise TopicAuthorizationError.of(denied)
        retry = bool(unknown)
        for fut in futures:
            if not clock.wait(fut, max(0.1, deadline - clock.now())):
                retry = True
                continue
            try:
                resp = fut.result(0)
            except KafkaError:
                retry = True
                continue
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    code = int(p.error_code)
                    if code == ErrorCode.none:
                        out[tp] = (int(p.offset), int(p.timestamp))
                        todo.pop(tp, None)
                    elif code in _RETRIABLE_METADATA:
                        retry = True
                    else:
                        raise error_for(code, f"ListOffsets {tp}")
        if todo and retry:
            if clock.now() > deadline:
                raise KafkaTimeoutError(f"ListOffsets did not complete for {sorted(todo)}")
            clock.sleep(0.1)
            metadata.refresh({tp.topic for tp in todo}, max(0.1, deadline - clock.now()),
                             allow_auto_create=allow_auto_create)
    return out
