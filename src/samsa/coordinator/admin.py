"""DescribeGroups (15), ListGroups (16) and DeleteGroups (42) for one shard's groups."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import DeleteGroups, DescribeGroups, ListGroups
from samsa.coordinator.offsets import maybe_remove_empty_group
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
)
from samsa.coordinator.state import Do, GroupState, Request, answer, as_error

S = GroupState
E = ErrorCode

CLASSIC_GROUP_TYPE = "classic"


def handle_describe(core: ShardCore, ev: DescribeGroups, token: object) -> None:
    core.reply(token, DescribeGroupsResponse(tuple(describe_group(core, g) for g in ev.groups)))


def describe_group(core: ShardCore, group_id: str) -> DescribedGroup:
    """Protocol, member metadata and assignments are shown only for Stable groups."""
    group = core.groups.get(group_id)
    if group is None:
        return DescribedGroup(group_id, E.none, S.DEAD.value)
    stable = group.is_(S.STABLE) and group.protocol_name is not None
    protocol = group.protocol_name if stable and group.protocol_name is not None else ""
    members = tuple(
        DescribedMember(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.metadata(protocol) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id, E.none, group.state.value, group.protocol_type or "", protocol, members
    )


def handle_list(core: ShardCore, ev: ListGroups, token: object) -> None:
    core.reply(token, ListGroupsResponse(E.none, tuple(list_groups(core, ev))))


def list_groups(core: ShardCore, ev: ListGroups) -> list[ListedGroup]:
    """Groups of this shard, filtered by state and type names (case-insensitive)."""
    if ev.types_filter and CLASSIC_GROUP_TYPE not in {t.lower() for t in ev.types_filter}:
        return []
    states = {s.lower() for s in ev.states_filter}
    return [
        ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
        for g in core.groups.values()
        if not states or g.state.value.lower() in states
    ]


def handle_delete(core: ShardCore, ev: DeleteGroups, token: object) -> None:
    core.reply(token, DeleteGroupsResponse(tuple(delete_group(core, g) for g in ev.groups)))


def delete_group(core: ShardCore, group_id: str) -> DeletedGroup:
    """Only Empty groups can be deleted: tombstones for every offset and the metadata."""
    group = core.groups.get(group_id)
    if group is None:
        return DeletedGroup(group_id, E.group_id_not_found)
    cell = answer(Request.DELETE_GROUP, group.state)
    if cell is not Do.DELETE_GROUP:
        return DeletedGroup(group_id, as_error(cell))
    for tp in list(core.offsets_of(group_id)):
        core.write_offset_tombstone(group_id, tp)
    maybe_remove_empty_group(core, group)
    return DeletedGroup(group_id, E.none)
