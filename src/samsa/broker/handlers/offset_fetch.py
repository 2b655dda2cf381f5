"""OffsetFetch (key 9): a group's committed offsets.

Needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED) and on each topic: a topic
asked for that the caller may not describe gets TOPIC_AUTHORIZATION_FAILED, and of a
group's offsets (topics null) only those of describable topics are answered, as in Kafka.
v1 has no group error: a group's error is each partition's.

Versions: v2 topics may be null (all of the group's offsets) and a top-level error code;
v3 throttle_time; v5 committed_leader_epoch; v6 flexible; v7 require_stable (a partition
with offsets staged by an open transaction is UNSTABLE_OFFSET_COMMIT); v8 several
groups per request, each with its own error code; v9 each group's member id and epoch (a
KIP-848 consumer group checks them: STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID; none, or epoch
-1, fetches as an admin); v10 names topics by id only (Kafka 4.1+): ids are resolved to names
here, so the coordinator sees names at every version. An id this broker does not know gets
UNKNOWN_TOPIC_ID on each of its partitions (by name, an unknown topic is just "no offset");
a null topic list answers the committed topics that still exist, by their ids. The answer
is built typed, as v10, v8 or (the shapes differ) as v7 for v1-7.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import response as v7
from kio.schema.offset_fetch.v8 import response as v8
from kio.schema.offset_fetch.v10 import response as v10
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from samsa.broker import access
from samsa.broker.context import RequestContext
from samsa.broker.topics import TopicManager
from samsa.coordinator import FetchGroup, FetchTopic, OffsetFetch
from samsa.coordinator import responses as co
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, convert
from samsa.security.acl import AclOperation, ResourceType

API_KEY = ApiKey.OFFSET_FETCH
VERSIONS = (1, 10)
TOPIC_IDS_VERSION = 10
"""The first version naming topics by id (and no longer by name)."""

P = TypeVar("P", v8.OffsetFetchResponsePartitions, v10.OffsetFetchResponsePartitions)


def _topics(req_topics: Any, ids: dict[uuid.UUID, str] | None) -> tuple[FetchTopic, ...] | None:
    """The coordinator's view of the asked topics: by name; ids known here are resolved
    through ``ids`` (unknown ones are left out, the answer adds them back)."""
    if req_topics is None:
        return None
    if ids is None:
        return tuple(FetchTopic(t.name, tuple(t.partition_indexes)) for t in req_topics)
    return tuple(FetchTopic(ids[t.topic_id], tuple(t.partition_indexes)) for t in req_topics
                 if t.topic_id in ids)


def _partitions(cls: type[P], t: co.FetchedTopic) -> tuple[P, ...]:
    return tuple(cls(partition_index=i32(p.partition), committed_offset=i64(p.committed_offset),
                     committed_leader_epoch=i32(p.committed_leader_epoch), metadata=p.metadata,
                     error_code=ErrorCode(p.error_code)) for p in t.partitions)


def _unknown_id(indexes: Any) -> co.FetchedTopic:
    return co.FetchedTopic("", tuple(
        co.FetchedPartition(int(i), error_code=ErrorCode.unknown_topic_id) for i in indexes))


def _by_id(group: co.FetchedGroup, asked: Any, ids: dict[uuid.UUID, str],
           topics: TopicManager) -> tuple[v10.OffsetFetchResponseTopics, ...]:
    """The answer's topics at v10: as asked (unknown ids with UNKNOWN_TOPIC_ID), or every
    fetched topic that still has an id when all were asked for."""
    if group.error_code:
        return ()
    fetched = {t.name: t for t in group.topics}
    if asked is None:  # not get(name): on a cluster node each deleted name re-reads topics
        live = {topic.name: topic.topic_id for topic in topics}
        rows = [(live[t.name], t) for t in group.topics if t.name in live]
    else:
        rows = [(t.topic_id, fetched[ids[t.topic_id]] if t.topic_id in ids
                 else _unknown_id(t.partition_indexes)) for t in asked]
    return tuple(v10.OffsetFetchResponseTopics(
        topic_id=tid, partitions=_partitions(v10.OffsetFetchResponsePartitions, t))
        for tid, t in rows)


def _by_name(group: co.FetchedGroup) -> tuple[v8.OffsetFetchResponseTopics, ...]:
    return tuple(v8.OffsetFetchResponseTopics(
        name=TopicName(t.name), partitions=_partitions(v8.OffsetFetchResponsePartitions, t))
        for t in group.topics)


async def handle(ctx: RequestContext) -> (v7.OffsetFetchResponse | v8.OffsetFetchResponse
                                          | v10.OffsetFetchResponse):
    body = ctx.body
    topics = ctx.broker.topics
    require_stable = bool(getattr(body, "require_stable", False))
    ids: dict[uuid.UUID, str] | None = None
    if ctx.version >= TOPIC_IDS_VERSION:  # resolve: another node may have just made one
        await topics.resolve(ids=[t.topic_id for g in body.groups for t in g.topics or ()],
                             hold=ctx.hold)
        ids = {t.topic_id: topic.name for g in body.groups for t in g.topics or ()
               if t.topic_id is not None and (topic := topics.by_id(t.topic_id)) is not None}
    if ctx.version >= 8:
        groups = tuple(FetchGroup(g.group_id, _topics(g.topics, ids),
                                  member_id=getattr(g, "member_id", None),
                                  member_epoch=int(getattr(g, "member_epoch", -1)))
                       for g in body.groups)
    else:
        groups = (FetchGroup(body.group_id, _topics(body.topics, None)),)
    resp = await _fetch_authorized(ctx, OffsetFetch(groups, require_stable))
    if require_stable:
        resp = _unstable(ctx, resp)
    if ids is not None:
        return v10.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(
            v10.OffsetFetchResponseGroup(group_id=GroupId(g.group_id),
                                         topics=_by_id(g, asked.topics, ids, topics),
                                         error_code=ErrorCode(g.error_code))
            for g, asked in zip(resp.groups, body.groups, strict=True)))
    if ctx.version >= 8:
        return v8.OffsetFetchResponse(throttle_time=NO_THROTTLE, groups=tuple(
            v8.OffsetFetchResponseGroup(group_id=GroupId(g.group_id), topics=_by_name(g),
                                        error_code=ErrorCode(g.error_code))
            for g in resp.groups))
    (group,) = resp.groups
    return v7.OffsetFetchResponse(
        throttle_time=NO_THROTTLE, error_code=ErrorCode(group.error_code),
        topics=tuple(convert(t, v7.OffsetFetchResponseTopic) for t in _by_name(group)))


def _unstable(ctx: RequestContext, resp: co.OffsetFetchResponse) -> co.OffsetFetchResponse:
    """``require_stable``: a partition with offsets an open transaction staged is
    UNSTABLE_OFFSET_COMMIT (the client retries), as in Kafka."""
    groups = []
    for g in resp.groups:
        pending = ctx.broker.txn_offsets.unstable(g.group_id) if not g.error_code else set()
        if pending:
            g = replace(g, topics=tuple(co.FetchedTopic(t.name, tuple(
                co.FetchedPartition(p.partition, error_code=ErrorCode.unstable_offset_commit)
                if (t.name, p.partition) in pending else p for p in t.partitions))
                for t in g.topics))
        groups.append(g)
    return replace(resp, groups=tuple(groups))


async def _fetch_authorized(ctx: RequestContext, event: OffsetFetch) -> co.OffsetFetchResponse:
    """The coordinator's answer for what the caller may describe (see the module docstring)."""
    describe, topic = AclOperation.DESCRIBE, ResourceType.TOPIC
    asked = {t.name for g in event.groups for t in g.topics or ()}
    hidden = asked - access.allowed_names(ctx, describe, topic, asked)
    shown = event if not hidden else replace(event, groups=tuple(
        g if g.topics is None else replace(
            g, topics=tuple(t for t in g.topics if t.name not in hidden))
        for g in event.groups))
    resp = await access.call_group(ctx, shown, describe)
    assert isinstance(resp, co.OffsetFetchResponse)
    groups = []
    for request, g in zip(event.groups, resp.groups, strict=True):
        if g.error_code and ctx.version < 2 and request.topics:  # v1 has no group error
            g = replace(g, topics=tuple(co.FetchedTopic(t.name, tuple(
                co.FetchedPartition(p, error_code=g.error_code) for p in t.partitions))
                for t in request.topics))
        elif g.error_code:
            pass
        elif request.topics is None:  # all of them: only the describable ones
            names = access.allowed_names(ctx, describe, topic, {t.name for t in g.topics})
            if len(names) < len({t.name for t in g.topics}):
                g = replace(g, topics=tuple(t for t in g.topics if t.name in names))
        elif hidden:
            g = replace(g, topics=g.topics + tuple(co.FetchedTopic(t.name, tuple(
                co.FetchedPartition(p, error_code=ErrorCode.topic_authorization_failed)
                for p in t.partitions)) for t in request.topics if t.name in hidden))
        groups.append(g)
    return replace(resp, groups=tuple(groups))
