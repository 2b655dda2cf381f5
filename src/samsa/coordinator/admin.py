"""DescribeGroups (15), ListGroups (16) and DeleteGroups (42) for one shard's groups
(the first two answer from the read-only views of :mod:`.queries`)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator import offsets, queries
from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import DeleteGroups, DescribeGroups, ListGroups
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
)
from samsa.coordinator.state import GroupState

S = GroupState
E = ErrorCode


def handle_describe(core: ShardCore, ev: DescribeGroups, token: object) -> None:
    core.reply(token, DescribeGroupsResponse(
        tuple(describe_group(core, g, ev.api_version) for g in ev.groups)))


#: DescribeGroups v6 (KIP-1043) reports a group that is absent or not classic as an error.
DESCRIBE_GROUP_ERRORS_VERSION = 6


def describe_group(core: ShardCore, group_id: str, api_version: int = 0) -> DescribedGroup:
    """Protocol, member metadata and assignments are shown only for Stable groups. A group
    that is absent or not classic is Dead: from v6 with GROUP_ID_NOT_FOUND and Kafka's
    message (``GroupMetadataManager.describeGroups``)."""
    described = queries.describe(core, group_id)
    if described is None or described.summary.group_type != queries.CLASSIC_GROUP_TYPE:
        if api_version < DESCRIBE_GROUP_ERRORS_VERSION:
            return DescribedGroup(group_id, E.none, S.DEAD.value)
        message = (f"Group {group_id} not found." if described is None
                   else f"Group {group_id} is not a classic group.")
        return DescribedGroup(group_id, E.group_id_not_found, S.DEAD.value,
                              error_message=message)
    summary = described.summary
    protocol = summary.protocol if summary.state is S.STABLE else ""
    members = tuple(
        DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata,
            m.assignment,
        )
        for m in described.members
    )
    return DescribedGroup(
        group_id, E.none, summary.state.value, summary.protocol_type, protocol, members
    )


def handle_list(core: ShardCore, ev: ListGroups, token: object) -> None:
    core.reply(token, ListGroupsResponse(E.none, tuple(list_groups(core, ev))))


def list_groups(core: ShardCore, ev: ListGroups) -> list[ListedGroup]:
    """Groups of this shard (every type), filtered by state and type names
    (case-insensitive)."""
    types = {t.lower().strip() for t in ev.types_filter}
    states = {s.lower().strip() for s in ev.states_filter}
    return [
        ListedGroup(g.group_id, g.protocol_type, g.state.value, g.group_type)
        for g in queries.summaries(core)
        if (not types or g.group_type in types)
        and (not states or g.state.value.lower() in states)
    ]


def handle_delete(core: ShardCore, ev: DeleteGroups, token: object) -> None:
    core.reply(token, DeleteGroupsResponse(tuple(delete_group(core, g) for g in ev.groups)))


def delete_group(core: ShardCore, group_id: str) -> DeletedGroup:
    """A group of any type that allows it (classic: Empty; consumer: no members): its
    offsets get tombstones, then the group (Kafka's ``GroupCoordinatorShard.deleteGroups``)."""
    found = core.find_group(group_id)
    if found is None:
        return DeletedGroup(group_id, E.group_id_not_found)
    family, group = found
    error = group.validate_delete_group()
    if error is not None:
        return DeletedGroup(group_id, error)
    offsets.delete_all_offsets(core, group_id)
    offsets.delete_group(core, family, group)
    return DeletedGroup(group_id, E.none)
