"""The driver of a KIP-932 ``share`` group member (``samsa.ShareConsumer``'s membership).

An :class:`~samsa.client.group.epoch_driver.EpochDriver` (heartbeat thread at the interval
the coordinator gives, reconciliation of the assignment, leaving at epoch -1) running
:class:`~samsa.client.group.share_machine.ShareMembership`; what is the share protocol's
here is the ShareGroupHeartbeat body. A share member commits no offsets: records are
acknowledged through ShareFetch and ShareAcknowledge (:mod:`samsa.client.share`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.group.context import MemberContext
from samsa.client.group.epoch_driver import EpochDriver
from samsa.client.group.share_machine import (
    ShareHeartbeatRequest,
    ShareMembership,
    ShareMembershipConfig,
)
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionState

__all__ = ["ShareGroupDriver", "share_heartbeat_body"]


def share_heartbeat_body(group_id: str, req: ShareHeartbeatRequest) -> dict[str, Any]:
    """The ShareGroupHeartbeat v1 request body of ``req`` (None: unchanged)."""
    return {
        "group_id": group_id,
        "member_id": req.member_id,
        "member_epoch": req.member_epoch,
        "rack_id": req.rack_id,
        "subscribed_topic_names": None if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
    }


class ShareGroupDriver(EpochDriver[ShareMembership]):
    """Group membership and heartbeats of a ``share`` group member."""

    heartbeat_api = ApiKey.SHARE_GROUP_HEARTBEAT

    def __init__(self, metadata: Metadata, subs: SubscriptionState, *, group_id: str,
                 max_poll_interval_ms: int, rack: str | None, retry_backoff_ms: int,
                 client_id: str, wakeup_flag: Callable[[], bool],
                 on_assignment_changed: Callable[[set[TopicPartition]], None] = lambda _: None,
                 clock: Clock = SYSTEM_CLOCK, member_id: str | None = None) -> None:
        config = ShareMembershipConfig(
            group_id=group_id, member_id=member_id or str(uuid.uuid4()), rack_id=rack,
            rebalance_timeout_ms=max_poll_interval_ms, retry_backoff_ms=retry_backoff_ms)
        member = MemberContext(ShareMembership(config), metadata, subs, client_id=client_id,
                               clock=clock, wakeup_flag=wakeup_flag)
        super().__init__(member, auto_commit=False, auto_commit_interval_ms=0,
                         on_assignment_changed=on_assignment_changed)

    def _heartbeat_body(self, request: ShareHeartbeatRequest) -> dict[str, Any]:
        return share_heartbeat_body(self.member.group_id, request)
