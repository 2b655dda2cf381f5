"""Every error path of ConsumerGroupHeartbeat (Kafka's order and codes); a refused request
writes no record."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from samsa.coordinator import CoordinatorConfig

from .consumer_ctx import T1, CCtx


def _refused(ctx: CCtx, code: int, **kw: object) -> None:
    before = len(ctx.records)
    r = ctx.hb(**kw)  # type: ignore[arg-type]
    assert r.error_code == code, r
    assert r.error_message
    assert len(ctx.records) == before


@pytest.mark.parametrize("kw", [
    {"member_id": "", "epoch": 0},  # v1: the client makes its member id
    {"member_id": "", "epoch": 3, "api_version": 0},
    {"member_id": "", "epoch": -1, "api_version": 0},
    {"member_id": "a", "epoch": 0, "group_id": ""},
    {"member_id": "a", "epoch": 0, "instance_id": ""},
    {"member_id": "a", "epoch": 0, "rack_id": ""},
    {"member_id": "a", "epoch": -2},  # static leave without instance id
    {"member_id": "a", "epoch": -3},
])
def test_invalid_request(kw: dict[str, object]) -> None:
    _refused(CCtx(), E.invalid_request, **kw)


def test_invalid_first_request() -> None:
    ctx = CCtx()
    from samsa.coordinator import ConsumerGroupHeartbeat, TopicPartitions
    from samsa.coordinator.responses import ConsumerGroupHeartbeatResponse

    bad = [
        ConsumerGroupHeartbeat("g", "a", 0, subscribed_topic_names=("t1",),
                               topic_partitions=()),  # no rebalance timeout
        ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=1,
                               subscribed_topic_names=("t1",)),  # owned is null
        ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=1,
                               subscribed_topic_names=("t1",),
                               topic_partitions=(TopicPartitions(T1, (0,)),)),
        ConsumerGroupHeartbeat("g", "a", 0, rebalance_timeout_ms=1, topic_partitions=()),
    ]
    for event in bad:
        r = ctx.reply(ctx.call(event))
        assert isinstance(r, ConsumerGroupHeartbeatResponse)
        assert r.error_code == E.invalid_request, event
    assert not ctx.records


def test_unsupported_assignor() -> None:
    _refused(CCtx(), E.unsupported_assignor, member_id="a", epoch=0, assignor="sticky")


def test_unknown_group_and_member() -> None:
    ctx = CCtx()
    _refused(ctx, E.group_id_not_found, member_id="a", epoch=1)
    _refused(ctx, E.group_id_not_found, member_id="a", epoch=-1)
    ctx.hb("a", 0)
    _refused(ctx, E.unknown_member_id, member_id="b", epoch=1)
    _refused(ctx, E.unknown_member_id, member_id="b", epoch=-1)
    _refused(ctx, E.unknown_member_id, member_id="b", epoch=1, instance_id="i")
    _refused(ctx, E.unknown_member_id, member_id="b", epoch=-2, instance_id="i")


def test_fenced_member_epoch() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    _refused(ctx, E.fenced_member_epoch, member_id="a", epoch=3)
    ctx.hb("b", 0)  # epoch 3 for the group; a is still at 2 with previous 0
    _refused(ctx, E.fenced_member_epoch, member_id="b", epoch=2, owned={})


def test_static_member_errors() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i")
    # another member takes the instance id while a holds it
    _refused(ctx, E.unreleased_instance_id, member_id="b", epoch=0, instance_id="i")
    # a heartbeat or leave for the instance id from another member id
    _refused(ctx, E.fenced_instance_id, member_id="b", epoch=2, instance_id="i")
    _refused(ctx, E.fenced_instance_id, member_id="b", epoch=-2, instance_id="i")


def test_group_max_size() -> None:
    ctx = CCtx(CoordinatorConfig(offsets_topic_num_partitions=1, consumer_max_size=2))
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    _refused(ctx, E.group_max_size_reached, member_id="c", epoch=0)
    assert ctx.hb("a", 0).error_code == 0  # a member already in the group may rejoin


def test_invalid_regular_expression() -> None:
    ctx = CCtx()
    _refused(ctx, E.invalid_regular_expression, member_id="a", epoch=0, regex="t[")
    _refused(ctx, E.invalid_regular_expression, member_id="a", epoch=0, regex="(?=t)t1")
    ctx.hb("a", 0, regex="t.*")
    _refused(ctx, E.invalid_regular_expression, member_id="a",
             epoch=ctx.member("a").member_epoch, regex="(")


@pytest.mark.parametrize("regex", [
    "(?>t1)",  # atomic group: Python's re (3.11+) accepts it, RE2 does not
    "t1*+",  # possessive quantifier: likewise
    "(t)\\1",  # backreference
    "t(?!2)1",  # lookahead
    "(?<=t)1",  # lookbehind
    "t{1001}",  # RE2's repetition limit
])
def test_patterns_re2_refuses_are_invalid(regex: str) -> None:
    ctx = CCtx()
    _refused(ctx, E.invalid_regular_expression, member_id="a", epoch=0, regex=regex)


def test_consumer_protocol_disabled() -> None:
    ctx = CCtx(CoordinatorConfig(offsets_topic_num_partitions=1,
                                 rebalance_protocols=("classic",)))
    _refused(ctx, E.unsupported_version, member_id="a", epoch=0)


def test_live_classic_group_is_not_a_consumer_group() -> None:
    ctx = CCtx()
    ctx.stable_group(1)
    _refused(ctx, E.group_id_not_found, member_id="a", epoch=0)
    _refused(ctx, E.group_id_not_found, member_id="a", epoch=-1)


def test_not_coordinator_and_loading() -> None:
    ctx = CCtx()
    ctx.coord.unload(0)
    assert ctx.hb("a", 0).error_code == E.not_coordinator
    ctx.coord.begin_load(0)
    assert ctx.hb("a", 0).error_code == E.coordinator_load_in_progress
    ctx.coord.finish_load(0, ctx.now)
