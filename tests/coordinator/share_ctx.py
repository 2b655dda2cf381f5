"""A share-group (KIP-932) test context on the fake clock, on top of :class:`CCtx`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from samsa.coordinator.events import ShareGroupDescribe, ShareGroupHeartbeat
from samsa.coordinator.responses import ShareGroupDescribeResponse, ShareGroupHeartbeatResponse
from samsa.coordinator.share.group import ShareGroup

from .consumer_ctx import CCtx, as_dict


@dataclass
class SCtx(CCtx):
    def shb(self, member_id: str, epoch: int, group_id: str = "g",
            names: tuple[str, ...] | None = None,
            rack_id: str | None = None) -> ShareGroupHeartbeatResponse:
        if epoch == 0 and names is None:
            names = ("t1",)
        r = self.reply(self.call(ShareGroupHeartbeat(group_id, member_id, epoch, rack_id, names,
                                                     "client", "/127.0.0.1")))
        assert isinstance(r, ShareGroupHeartbeatResponse), r
        return r

    def sdescribe(self, *groups: str) -> ShareGroupDescribeResponse:
        r = self.reply(self.call(ShareGroupDescribe(groups)))
        assert isinstance(r, ShareGroupDescribeResponse), r
        return r

    def share_group(self, group_id: str = "g") -> ShareGroup:
        return self.shard(group_id).hard.share.groups[group_id]

    def assigned(self, member_id: str, group_id: str = "g") -> dict[uuid.UUID, set[int]]:
        member = self.share_group(group_id).members[member_id]
        return {t: set(ps) for t, ps in member.assigned.items() if ps}


__all__ = ["SCtx", "as_dict"]
