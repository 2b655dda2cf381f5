"""OffsetFetch (key 9): one group (v1-7) or several (v8)."""

from __future__ import annotations

from typing import Any

from samsa.broker.context import RequestContext
from samsa.coordinator import FetchGroup, FetchTopic, OffsetFetch
from samsa.coordinator.responses import FetchedGroup, OffsetFetchResponse

API_KEY = 9
VERSIONS = (1, 8)


def _topics(req_topics: Any) -> tuple[FetchTopic, ...] | None:
    if req_topics is None:
        return None
    return tuple(FetchTopic(t.name, tuple(t.partition_indexes)) for t in req_topics)


def _group_topics(group: FetchedGroup) -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [
        {"partition_index": p.partition, "committed_offset": p.committed_offset,
         "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata,
         "error_code": p.error_code} for p in t.partitions]} for t in group.topics]


async def handle(ctx: RequestContext) -> Any:
    body = ctx.body
    require_stable = bool(getattr(body, "require_stable", False))
    if ctx.version >= 8:
        groups = tuple(FetchGroup(g.group_id, _topics(g.topics)) for g in body.groups)
    else:
        groups = (FetchGroup(body.group_id, _topics(body.topics)),)
    resp = await ctx.broker.groups.call(OffsetFetch(groups, require_stable))
    assert isinstance(resp, OffsetFetchResponse)
    if ctx.version >= 8:
        return ctx.respond(throttle_time=0, groups=[
            {"group_id": g.group_id, "topics": _group_topics(g), "error_code": g.error_code}
            for g in resp.groups])
    (group,) = resp.groups
    return ctx.respond(throttle_time=0, topics=_group_topics(group), error_code=group.error_code)
