"""DescribeProducers (key 61, KIP-664): the active producers of partitions, from each
partition's producer state: id, epoch, last sequence and timestamp, and the first offset
of its open transaction (-1 without one), which is how a hanging transaction is found.

Needs READ on each topic (else TOPIC_AUTHORIZATION_FAILED); a partition this broker does
not have is UNKNOWN_TOPIC_OR_PARTITION, one a cluster node does not lead
NOT_LEADER_OR_FOLLOWER. Versions: v0. Built typed.
"""

from __future__ import annotations

from kio.schema.describe_producers.v0 import response as v0
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import i32, i64

from samsa.broker import access, leadership
from samsa.broker.context import RequestContext
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)


def _partition(ctx: RequestContext, topic: str, index: int,
               readable: bool) -> v0.PartitionResponse:
    def answer(code: ErrorCode, producers: tuple[v0.ProducerState, ...] = ()
               ) -> v0.PartitionResponse:
        return v0.PartitionResponse(partition_index=i32(index), error_code=code,
                                    error_message=None, active_producers=producers)

    if not readable:
        return answer(ErrorCode.topic_authorization_failed)
    part = ctx.broker.topics.partition(topic, index)
    if part is None:
        return answer(ErrorCode.unknown_topic_or_partition)
    code = leadership.leader_error(ctx.broker, part)
    if code != ErrorCode.none:
        return answer(code)
    state = part.log.producers
    return answer(ErrorCode.none, tuple(
        v0.ProducerState(producer_id=ProducerId(pid), producer_epoch=i32(entry.epoch),
                         last_sequence=i32(entry.last_seq),
                         last_timestamp=i64(entry.last_timestamp),
                         coordinator_epoch=i32(0),
                         current_txn_start_offset=i64(state.ongoing.get(pid, -1)))
        for pid, entry in sorted(state.entries.items())))


async def handle(ctx: RequestContext) -> v0.DescribeProducersResponse:
    body = ctx.body
    readable = access.allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC,
                                    [t.name for t in body.topics])
    return v0.DescribeProducersResponse(throttle_time=NO_THROTTLE, topics=tuple(
        v0.TopicResponse(name=TopicName(t.name), partitions=tuple(
            _partition(ctx, t.name, int(p), t.name in readable) for p in t.partition_indexes))
        for t in body.topics))
