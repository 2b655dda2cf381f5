"""The coordinator's step of AlterShareGroupOffsets and DeleteShareGroupOffsets
(:class:`~samsa.coordinator.events.ShareGroupOffsetsChange`): the group must be a share
group without members (NON_EMPTY_GROUP; GROUP_ID_NOT_FOUND for a group of another type).
AlterShareGroupOffsets on a group that does not exist yet creates it, empty at group epoch
0, as Kafka's ``GroupMetadataManager.alterShareGroupOffsets`` does: ShareGroupDescribe,
DescribeShareGroupOffsets and ListGroups see it from then on. The share-partition state
itself is the partition leaders' (:mod:`samsa.broker.shares`)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from samsa.coordinator.core import ShardCore
from samsa.coordinator.events import ShareGroupOffsetsChange
from samsa.coordinator.responses import ShareGroupOffsetsChangeResponse
from samsa.coordinator.share import record_factory as records

E = ErrorCode


def handle_offsets_change(core: ShardCore, ev: ShareGroupOffsetsChange, token: object) -> None:
    gid = ev.group_id
    group = core.hard.share.groups.get(gid)
    if group is None and core.find_group(gid) is not None:
        core.reply(token, ShareGroupOffsetsChangeResponse(
            E.group_id_not_found, f"Group {gid} is not a share group."))
        return
    if group is None:
        if not ev.create:
            core.reply(token, ShareGroupOffsetsChangeResponse(
                E.group_id_not_found, f"Group {gid} not found."))
            return
        core.write(*records.group_epoch(gid, 0))
    elif group.members:
        core.reply(token, ShareGroupOffsetsChangeResponse(
            E.non_empty_group, f"Share group {gid} has members."))
        return
    core.reply(token, ShareGroupOffsetsChangeResponse(E.none))
