"""The driver of a KIP-848 ``consumer`` group member: ``Consumer(group_protocol="consumer")``.

An :class:`~samsa.client.group.epoch_driver.EpochDriver` (heartbeat thread,
reconciliation, leaving) running
:class:`~samsa.client.group.consumer_machine.ConsumerMembership`; the classic protocol's
sibling is :mod:`~samsa.client.group.classic_driver`. What is the consumer protocol's here:
the ConsumerGroupHeartbeat body (:func:`heartbeat_body`), commits with OffsetCommit v9 and
the member epoch (:class:`CgCommitter`), a static member's leave on
``close(leave_group=False)``, and the configuration check of ``group_protocol``
(:func:`check_group_protocol`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.clock import SYSTEM_CLOCK, Clock
from samsa.client.errors import KafkaError
from samsa.client.group.commits import OffsetCommitter
from samsa.client.group.consumer_machine import (
    ConsumerMembership,
    ConsumerMembershipConfig,
    HeartbeatRequest,
)
from samsa.client.group.context import MemberContext
from samsa.client.group.epoch_driver import EpochDriver
from samsa.client.metadata import Metadata
from samsa.client.net import ApiKey
from samsa.client.subscription import SubscriptionState

__all__ = [
    "GROUP_PROTOCOLS",
    "CgCommitter",
    "ConsumerProtocolCoordinator",
    "check_group_protocol",
    "heartbeat_body",
]

log = logging.getLogger(__name__)

GROUP_PROTOCOLS = ("classic", "consumer")

CONSUMER_PROTOCOL_UNSUPPORTED = ("partition_assignment_strategy", "heartbeat_interval_ms",
                                 "session_timeout_ms")
"""Settings a ``consumer`` group member may not set: the broker assigns partitions and
decides the session timeout and heartbeat interval (Kafka's ConsumerConfig refuses them)."""

OFFSET_COMMIT_VERSION = 9
"""OffsetCommit v9: the version a consumer-protocol member must commit with (its
``generation_id_or_member_epoch`` is the member epoch)."""


def check_group_protocol(configs: Mapping[str, Any]) -> str:
    """Validate ``group_protocol`` and the settings that go with it (as Kafka's
    ``ConsumerConfig`` does); the protocol, lower case."""
    protocol = str(configs.get("group_protocol") or "classic").lower()
    if protocol not in GROUP_PROTOCOLS:
        raise ValueError(f"group_protocol must be 'classic' or 'consumer', not "
                         f"{configs.get('group_protocol')!r}")
    assignor = configs.get("group_remote_assignor")
    if protocol == "classic" and assignor is not None:
        raise ValueError("group_remote_assignor cannot be set when group_protocol='classic' "
                         "(classic members assign partitions themselves: use "
                         "partition_assignment_strategy)")
    if protocol == "consumer":
        given = [k for k in CONSUMER_PROTOCOL_UNSUPPORTED if configs.get(k) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} cannot be set when group_protocol="
                             "'consumer': the broker assigns the partitions (choose its "
                             "assignor with group_remote_assignor) and sets the session "
                             "timeout and heartbeat interval")
        if assignor is not None and (not isinstance(assignor, str) or not assignor):
            raise ValueError("group_remote_assignor must be the name of a broker assignor "
                             "('uniform', 'range') or None for the broker's default")
    return protocol


def heartbeat_body(group_id: str, req: HeartbeatRequest) -> dict[str, Any]:
    """The ConsumerGroupHeartbeat request body of ``req`` (None: unchanged)."""
    return {
        "group_id": group_id,
        "member_id": req.member_id,
        "member_epoch": req.member_epoch,
        "instance_id": req.instance_id,
        "rack_id": req.rack_id,
        "rebalance_timeout": -1 if req.rebalance_timeout_ms is None
        else req.rebalance_timeout_ms,
        "subscribed_topic_names": None if req.subscribed_topic_names is None
        else list(req.subscribed_topic_names),
        "subscribed_topic_regex": req.subscribed_topic_regex,
        "server_assignor": req.server_assignor,
        "topic_partitions": None if req.topic_partitions is None
        else [{"topic_id": tid, "partitions": list(ps)} for tid, ps in req.topic_partitions],
    }


class CgCommitter(OffsetCommitter):
    """Commits with OffsetCommit v9 (member id and epoch); ``commit_sync`` retries
    STALE_MEMBER_EPOCH with the member's latest epoch while it stays in the group."""

    def _commit_body(self, offsets: Mapping[TopicPartition, Any],
                     identity: tuple[int, str]) -> dict[str, Any]:
        body = super()._commit_body(offsets, identity)
        body["__version__"] = OFFSET_COMMIT_VERSION
        return body

    def commit_sync(self, offsets: Mapping[TopicPartition, Any], timeout_s: float,
                    interruptible: bool = False) -> None:
        m = self.member
        deadline = m.clock.now() + timeout_s
        while True:
            try:
                super().commit_sync(offsets, max(0.1, deadline - m.clock.now()), interruptible)
                return
            except KafkaError as exc:
                if exc.code != ErrorCode.stale_member_epoch or m.clock.now() >= deadline:
                    raise
                log.debug("commit with a stale member epoch, retrying: %s", exc)
                m.clock.sleep(m.config.retry_backoff_ms / 1000)


class ConsumerProtocolCoordinator(EpochDriver[ConsumerMembership]):
    """Group membership, heartbeats and offset commits of a ``consumer`` group member."""

    committer = CgCommitter
    heartbeat_api = ApiKey.CONSUMER_GROUP_HEARTBEAT

    def __init__(self, metadata: Metadata, subs: SubscriptionState, *, group_id: str,
                 group_instance_id: str | None, rebalance_timeout_ms: int,
                 server_assignor: str | None, rack: str | None, retry_backoff_ms: int,
                 client_id: str, auto_commit: bool, auto_commit_interval_ms: int,
                 wakeup_flag: Callable[[], bool],
                 on_assignment_changed: Callable[[set[TopicPartition]], None] = lambda _: None,
                 clock: Clock = SYSTEM_CLOCK, member_id: str | None = None) -> None:
        config = ConsumerMembershipConfig(
            group_id=group_id, member_id=member_id or str(uuid.uuid4()),
            group_instance_id=group_instance_id, rack_id=rack,
            rebalance_timeout_ms=rebalance_timeout_ms, server_assignor=server_assignor,
            retry_backoff_ms=retry_backoff_ms)
        member = MemberContext(ConsumerMembership(config, auto_commit=auto_commit), metadata,
                               subs, client_id=client_id, clock=clock, wakeup_flag=wakeup_flag)
        super().__init__(member, auto_commit=auto_commit,
                         auto_commit_interval_ms=auto_commit_interval_ms,
                         on_assignment_changed=on_assignment_changed)

    def _heartbeat_body(self, request: HeartbeatRequest) -> dict[str, Any]:
        return heartbeat_body(self.member.group_id, request)

    def _remain(self) -> None:
        """``close(leave_group=False)``: a static member still leaves with epoch -2 (the
        group keeps its partitions for it); a dynamic one sends nothing."""
        m = self.member
        with m.lock:
            request = m.machine.static_leave_request(m.now_ms())
        self._send_leave(request)
