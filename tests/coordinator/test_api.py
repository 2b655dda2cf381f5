"""Small API pieces: config, error answers, fake timer, illegal transitions."""

from __future__ import annotations

import pytest

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    CoordinatorConfig,
    DeleteGroups,
    DescribeGroups,
    Event,
    FetchGroup,
    Heartbeat,
    IllegalTransition,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    TimerKey,
    TimerKind,
    error_response,
)
from samsa.coordinator.group import Group
from samsa.coordinator.responses import (
    DeletedGroup,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    FetchedGroup,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    SyncGroupResponse,
    TopicErrors,
)
from samsa.coordinator.state import GroupState
from tests.coordinator.fake_timer import FakeTimer


def test_config_from_kafka_properties() -> None:
    cfg = CoordinatorConfig.from_properties(
        {
            "group.initial.rebalance.delay.ms": "0",
            "group.max.size": 10,
            "offsets.topic.num.partitions": "3",
            "log.segment.bytes": "1",
        }
    )
    assert (cfg.initial_rebalance_delay_ms, cfg.max_size, cfg.offsets_topic_num_partitions) == (
        0,
        10,
        3,
    )
    assert cfg.min_session_timeout_ms == 6000
    assert cfg.offsets_retention_ms == 7 * 24 * 3600 * 1000


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (JoinGroup("g", "m", "consumer", (), 10_000, 10_000), JoinGroupResponse(14, "m")),
        (SyncGroup("g", 1, "m"), SyncGroupResponse(14)),
        (Heartbeat("g", 1, "m"), HeartbeatResponse(14)),
        (LeaveGroup("g", ()), LeaveGroupResponse(14)),
        (
            OffsetCommit("g", (CommitTopic("t", (CommitPartition(0, 1),)),)),
            OffsetCommitResponse((TopicErrors("t", (PartitionError(0, 14),)),)),
        ),
        (OffsetFetch((FetchGroup("g"),)), OffsetFetchResponse((FetchedGroup("g", (), 14),))),
        (OffsetDelete("g", ()), OffsetDeleteResponse(14)),
        (DescribeGroups(("g",)), DescribeGroupsResponse((DescribedGroup("g", 14, ""),))),
        (ListGroups(), ListGroupsResponse(14, ())),
        (DeleteGroups(("g",)), DeleteGroupsResponse((DeletedGroup("g", 14),))),
    ],
)
def test_error_response_for_every_event(event: Event, expected: object) -> None:
    assert error_response(event, 14) == expected


def test_fake_timer_fires_in_deadline_order_and_allows_rescheduling() -> None:
    timer = FakeTimer()
    fired: list[tuple[str, int]] = []
    a = TimerKey(0, TimerKind.SESSION, "g", "a")
    b = TimerKey(0, TimerKind.SESSION, "g", "b")

    def on_fire(key: TimerKey, now: int) -> None:
        fired.append((key.member_id, now))
        if key == a:
            timer.schedule(a, now + 50)  # a periodic timer

    timer.on_fire = on_fire
    timer.schedule(b, 120)
    timer.schedule(a, 100)
    timer.cancel(TimerKey(0, TimerKind.SESSION, "g", "zzz"))
    assert timer.advance(200) == [a, b, a, a]
    assert fired == [("a", 100), ("b", 120), ("a", 150), ("a", 200)]
    assert timer.now_ms == 200 and timer.next_deadline() == 250


def test_group_refuses_illegal_transitions() -> None:
    group = Group("g")
    with pytest.raises(IllegalTransition):
        group.transition(GroupState.STABLE, 0)
    group.transition(GroupState.PREPARING_REBALANCE, 5)
    assert (group.state, group.state_timestamp) == (GroupState.PREPARING_REBALANCE, 5)
