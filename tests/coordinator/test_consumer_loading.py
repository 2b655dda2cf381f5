"""KIP-848 requests while a shard is not (yet) served (issue 26, item 6): librdkafka >= 2.15
and the Java client treat GROUP_ID_NOT_FOUND in a ConsumerGroupHeartbeat answer as fatal, so
a shard that is loading answers COORDINATOR_LOAD_IN_PROGRESS and one this coordinator does not
hold NOT_COORDINATOR, to every member whatever its epoch, and to ConsumerGroupDescribe; once
loaded from its records the shard serves the members it had. A group that really is gone (the
shard loaded, the group absent) gets Kafka 4.3's answers: a heartbeat with an epoch > 0 or a
leave GROUP_ID_NOT_FOUND (``getOrMaybeCreateConsumerGroup`` with ``createIfNotExists`` false),
a join creates the group again."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from samsa.coordinator import ConsumerGroupDescribe
from samsa.coordinator.responses import ConsumerGroupDescribeResponse

from .consumer_ctx import T1, CCtx

E = ErrorCode


def _stable_pair(ctx: CCtx) -> dict[str, int]:
    """Members a and b settled on t1; their epochs."""
    ctx.hb("a", 0)
    ctx.hb("b", 0)
    ctx.settle({"a": {}, "b": {}})
    return {m: ctx.member(m).member_epoch for m in "ab"}


def _describe_error(ctx: CCtx, group: str = "g") -> int:
    r = ctx.reply(ctx.call(ConsumerGroupDescribe((group,))))
    assert isinstance(r, ConsumerGroupDescribeResponse)
    return r.groups[0].error_code


@pytest.mark.parametrize("status", ["loading", "not held"])
def test_members_of_a_shard_not_served_are_never_told_their_group_is_gone(status: str) -> None:
    ctx = CCtx()
    epochs = _stable_pair(ctx)
    records = [(r.key, r.value) for r in ctx.records]
    ctx.absorb(ctx.coord.unload(0))
    if status == "loading":
        ctx.coord.begin_load(0)
    expected = E.coordinator_load_in_progress if status == "loading" else E.not_coordinator
    assert ctx.hb("a", epochs["a"]).error_code == expected
    assert ctx.hb("b", epochs["b"], full=True).error_code == expected
    assert ctx.hb("a", epochs["a"] - 1).error_code == expected  # a lost epoch bump
    assert ctx.hb("c", 0).error_code == expected
    assert ctx.hb("a", -1).error_code == expected
    assert ctx.hb("b", -2, instance_id="ib").error_code == expected
    assert _describe_error(ctx) == expected
    assert ctx.coord.coordinator_error("g") == expected
    if status == "not held":
        ctx.coord.begin_load(0)
    for key, value in records:
        ctx.shard().replay(key, value)
    ctx.absorb(ctx.coord.finish_load(0, ctx.now))
    for m in "ab":
        r = ctx.hb(m, epochs[m])
        assert (r.error_code, r.member_epoch) == (E.none, epochs[m])
    assert _describe_error(ctx) == E.none


def test_loaded_shard_without_the_group_answers_as_kafka() -> None:
    """The shard is loaded and the group is not in it (deleted, or expired while empty)."""
    ctx = CCtx()
    epochs = _stable_pair(ctx)
    ctx.absorb(ctx.coord.unload(0))
    ctx.absorb(ctx.coord.load(0, [], ctx.now))  # a log without the group
    ctx.records.clear()  # (the replay check: the log starts again)
    assert ctx.hb("a", epochs["a"]).error_code == E.group_id_not_found
    assert ctx.hb("a", -1).error_code == E.group_id_not_found
    assert _describe_error(ctx) == E.group_id_not_found
    r = ctx.hb("a", 0)  # what librdkafka and Java do not do after it: rejoin
    assert r.error_code == E.none and ctx.member("a").assigned == {T1: frozenset({0, 1, 2})}
