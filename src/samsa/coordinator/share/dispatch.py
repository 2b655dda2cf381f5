"""The shard's entry point for share groups: ShareGroupHeartbeat and ShareGroupDescribe,
and the answers of other group APIs about a share group's id (Kafka's: a classic join is
INCONSISTENT_GROUP_PROTOCOL, other classic and consumer APIs GROUP_ID_NOT_FOUND). Listing
and DescribeGroups go through :mod:`samsa.coordinator.queries`; DeleteGroups through
:func:`samsa.coordinator.admin.delete_group`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.answers import error_response
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import (
    ConsumerGroupHeartbeat,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    SyncGroup,
)
from samsa.coordinator.share import describe, heartbeat

E = ErrorCode

_NOT_OURS = (ConsumerGroupHeartbeat, Heartbeat, LeaveGroup, OffsetCommit, OffsetDelete, SyncGroup)


def dispatch(core: ShardCore, event: Event, token: object) -> bool:
    """Handle ``event`` if it is a share-group matter; False leaves it to the others."""
    if isinstance(event, ShareGroupHeartbeat):
        heartbeat.handle_heartbeat(core, event, token)
        return True
    if isinstance(event, ShareGroupDescribe):
        describe.handle_describe(core, event, token)
        return True
    groups = core.hard.share.groups
    if isinstance(event, OffsetFetch):
        if len(event.groups) == 1 and event.groups[0].group_id in groups:
            core.reply(token, error_response(event, E.group_id_not_found))
            return True
        return False
    if isinstance(event, JoinGroup) and event.group_id in groups:
        core.reply(token, error_response(event, E.inconsistent_group_protocol))
        return True
    if isinstance(event, _NOT_OURS) and event.group_id in groups:
        core.reply(token, error_response(event, E.group_id_not_found))
        return True
    return False
