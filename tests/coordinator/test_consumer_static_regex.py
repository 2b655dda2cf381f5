"""Static members (replacement after a -2 leave) and regex subscriptions with topics that
come and go."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from samsa.coordinator import TopicInfo
from samsa.coordinator.consumer.group import LEAVE_GROUP_STATIC_MEMBER_EPOCH

from .consumer_ctx import T1, T2, T3, CCtx, as_dict


def test_static_member_replaced_after_a_temporary_leave_keeps_its_partitions() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i1")
    ctx.hb("b", 0, instance_id="i2")
    owned = {"a": {T1: {0, 1, 2}}, "b": {}}
    ctx.settle(owned)
    a_parts = as_dict(ctx.hb("a", ctx.member("a").member_epoch, full=True).assignment)
    epoch = ctx.cgroup().epoch
    r = ctx.hb("a", -2, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (0, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
    assert ctx.member("a").member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
    # the restarted process comes back with a new member id: no rebalance
    r = ctx.hb("a2", 0, instance_id="i1")
    assert r.error_code == 0 and as_dict(r.assignment) == a_parts
    group = ctx.cgroup()
    assert "a" not in group.members and group.static_members["i1"] == "a2"
    assert group.epoch == epoch and r.member_epoch == epoch
    assert ctx.hb("a", 1, instance_id="i1").error_code == E.fenced_instance_id


def test_static_member_that_never_comes_back_is_fenced_by_its_session() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i1")
    ctx.hb("a", -2, instance_id="i1")
    ctx.sleep(46_000)
    assert "a" not in ctx.cgroup().members
    assert ctx.hb("a2", 0, instance_id="i1").error_code == 0


def test_static_member_leaving_for_good() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, instance_id="i1")
    r = ctx.hb("a", -1, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (0, -1)
    assert not ctx.cgroup().members and ctx.cgroup().static_members == {}


def test_regex_subscription_follows_new_and_deleted_topics() -> None:
    """Kafka resolves regexes in the background: the join is answered first, the regex's
    topics follow in a later epoch; a topic created later is picked up by the first
    heartbeat at least 10 s (REGEX_BATCH_REFRESH_MIN_INTERVAL_MS) after the last
    resolution, and its assignment by the heartbeat after that."""
    ctx = CCtx()
    r = ctx.hb("a", 0, names=(), regex="t.*")
    assert (r.member_epoch, as_dict(r.assignment)) == (2, {})
    assert ctx.cgroup().regexes["t.*"].topics == {"t1", "t2"}  # resolved since
    r = ctx.hb("a", 2)
    assert (r.member_epoch, as_dict(r.assignment)) == (3, {T1: {0, 1, 2}, T2: {0, 1}})
    # a topic is created: not resolved again within 10 s of the last resolution
    ctx.set_topics(TopicInfo(T1, "t1", 3), TopicInfo(T2, "t2", 2), TopicInfo(T3, "t3", 1))
    ctx.sleep(9_000)
    assert ctx.hb("a", 3).assignment is None and ctx.cgroup().epoch == 3
    ctx.sleep(1_001)
    assert ctx.hb("a", 3).assignment is None  # this one asks for the resolution
    assert ctx.cgroup().regexes["t.*"].topics == {"t1", "t2", "t3"} and ctx.cgroup().epoch == 4
    r = ctx.hb("a", 3)
    assert (r.member_epoch, as_dict(r.assignment)) == (4, {T1: {0, 1, 2}, T2: {0, 1}, T3: {0}})
    # a topic matching nothing changes nothing
    ctx.set_topics(TopicInfo(T1, "t1", 3), TopicInfo(T2, "t2", 2), TopicInfo(T3, "t3", 1),
                   TopicInfo(T3.__class__(int=9), "other", 1))
    ctx.sleep(10_001)
    assert ctx.hb("a", 4).assignment is None and ctx.hb("a", 4).assignment is None
    assert ctx.cgroup().epoch == 4
    # t2 is deleted: no resolution needed, the subscribed topics changed: it is revoked
    ctx.set_topics(TopicInfo(T1, "t1", 3), TopicInfo(T3, "t3", 1))
    r = ctx.hb("a", 4, owned={T1: {0, 1, 2}, T2: {0, 1}, T3: {0}})
    assert ctx.cgroup().epoch == 5
    assert as_dict(r.assignment) == {T1: {0, 1, 2}, T3: {0}}


def test_regexes_are_resolved_again_every_refresh_interval() -> None:
    """``group.consumer.regex.refresh.interval.ms``: a resolution older than it is done
    again even when no topic appeared."""
    from samsa.coordinator import CoordinatorConfig

    ctx = CCtx(CoordinatorConfig(offsets_topic_num_partitions=1,
                                 consumer_assignment_interval_ms=0,
                                 consumer_regex_refresh_interval_ms=30_000,
                                 consumer_session_timeout_ms=60_000))
    ctx.hb("a", 0, names=(), regex="t.*")
    first = ctx.cgroup().regexes["t.*"].timestamp
    ctx.sleep(20_000)
    ctx.hb("a", ctx.member("a").member_epoch)
    assert ctx.cgroup().regexes["t.*"].timestamp == first
    ctx.sleep(10_000)
    ctx.hb("a", ctx.member("a").member_epoch)
    assert ctx.cgroup().regexes["t.*"].timestamp == first + 30_000


def test_regex_is_a_full_match() -> None:
    ctx = CCtx()
    r = ctx.hb("a", 0, names=(), regex="t")
    assert as_dict(r.assignment) == {}
    assert ctx.cgroup().regexes["t"].topics == frozenset()


@pytest.mark.parametrize(("regex", "topics"), [
    (r"\pL\d", {"t1", "t2"}),  # Unicode classes: Python's re refuses \p
    (r"t1\z", {"t1"}),  # RE2's end of text: Python's re (< 3.14) refuses \z
    (r"[[:alpha:]][[:digit:]]", {"t1", "t2"}),  # POSIX classes: Python's re reads a set
    (r"t1|t", {"t1"}),  # full match: the shorter alternative alone is not enough
])
def test_regex_has_re2_syntax(regex: str, topics: set[str]) -> None:
    ctx = CCtx()
    r = ctx.hb("a", 0, names=(), regex=regex)
    assert r.error_code == 0, r
    assert ctx.cgroup().regexes[regex].topics == topics


def test_regex_change_drops_the_old_resolution() -> None:
    ctx = CCtx()
    ctx.hb("a", 0, names=(), regex="t1")
    assert as_dict(ctx.hb("a", 2).assignment) == {T1: {0, 1, 2}}  # at epoch 3
    r = ctx.hb("a", 3, regex="t2", owned={T1: {0, 1, 2}})
    # t1's resolution goes (a bump: epoch 4, t1 revoked), t2's comes (epoch 5)
    assert (r.member_epoch, as_dict(r.assignment)) == (3, {})
    group = ctx.cgroup()
    assert set(group.regexes) == {"t2"} and group.epoch == 5
    r = ctx.hb("a", 3, owned={})
    assert (r.member_epoch, as_dict(r.assignment)) == (5, {T2: {0, 1}})


def test_partitions_added_to_a_subscribed_topic_rebalance() -> None:
    ctx = CCtx()
    ctx.hb("a", 0)
    ctx.set_topics(TopicInfo(T1, "t1", 5), TopicInfo(T2, "t2", 2))
    r = ctx.hb("a", 2)
    assert r.member_epoch == 3 and as_dict(r.assignment) == {T1: {0, 1, 2, 3, 4}}
    # a change of a topic nobody subscribes to does not bump the epoch
    ctx.set_topics(TopicInfo(T1, "t1", 5), TopicInfo(T2, "t2", 9))
    assert ctx.hb("a", 3).member_epoch == 3 and ctx.cgroup().epoch == 3
