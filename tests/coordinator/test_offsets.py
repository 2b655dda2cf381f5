"""OffsetCommit, OffsetFetch, OffsetDelete and offset retention."""

from __future__ import annotations

from samsa.coordinator import (
    CommitPartition,
    CommitTopic,
    CoordinatorConfig,
    FetchGroup,
    FetchTopic,
    GroupState,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    Record,
)
from samsa.coordinator.records import GroupMetadataKey, OffsetCommitValue, serialize
from samsa.coordinator.responses import (
    FetchedGroup,
    FetchedPartition,
    FetchedTopic,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    PartitionError,
    TopicErrors,
)
from tests.coordinator.subscriptions import encode_subscription

from .harness import Ctx

S = GroupState
TOO_LARGE, UNKNOWN_MEMBER, ILLEGAL_GEN, REBALANCING = 12, 25, 22, 27
SUBSCRIBED, NON_EMPTY, NOT_FOUND = 86, 68, 69


def commit_errors(ctx: Ctx, token: int) -> dict[tuple[str, int], int]:
    r = ctx.reply(token)
    assert isinstance(r, OffsetCommitResponse)
    return {(t.name, p.partition): p.error_code for t in r.topics for p in t.partitions}


def fetch(ctx: Ctx, group: str = "g", topics: dict[str, tuple[int, ...]] | None = None):  # type: ignore[no-untyped-def]
    req = None if topics is None else tuple(FetchTopic(t, ps) for t, ps in topics.items())
    r = ctx.reply(ctx.call(OffsetFetch((FetchGroup(group, req),))))
    assert isinstance(r, OffsetFetchResponse)
    return r.groups[0]


def small_retention() -> CoordinatorConfig:
    return CoordinatorConfig(
        offsets_topic_num_partitions=1,
        offsets_retention_minutes=1,
        offsets_retention_check_interval_ms=10_000,
    )


# ---------------------------------------------------------------------- commit / fetch


def test_commit_and_fetch_round_trip() -> None:
    ctx = Ctx()
    t = ctx.call(
        OffsetCommit(
            "g",
            (
                CommitTopic(
                    "t", (CommitPartition(0, 42, 7, "meta"), CommitPartition(1, 3, -1, None))
                ),
            ),
        )
    )
    assert commit_errors(ctx, t) == {("t", 0): 0, ("t", 1): 0}
    assert fetch(ctx, topics={"t": (0, 1, 2)}) == FetchedGroup(
        "g",
        (
            FetchedTopic(
                "t",
                (
                    FetchedPartition(0, 42, 7, "meta"),
                    FetchedPartition(1, 3, -1, ""),
                    FetchedPartition(2, -1, -1, ""),
                ),
            ),
        ),
    )
    value = ctx.records[-1].value
    assert isinstance(value, OffsetCommitValue)
    assert value.commit_timestamp == ctx.now
    ctx.check_replay()


def test_fetch_all_offsets_and_unknown_group() -> None:
    ctx = Ctx()
    ctx.commit({("b", 1): 1, ("a", 0): 2, ("b", 0): 3})
    got = fetch(ctx)
    assert [(t.name, [p.partition for p in t.partitions]) for t in got.topics] == [
        ("a", [0]),
        ("b", [0, 1]),
    ]
    assert fetch(ctx, "nobody") == FetchedGroup("nobody", ())
    assert fetch(ctx, "nobody", {"a": (0,)}).topics[0].partitions == (FetchedPartition(0),)


def test_multi_group_fetch_keeps_request_order() -> None:
    ctx = Ctx(CoordinatorConfig(offsets_topic_num_partitions=5))
    for g in ("g1", "g2", "g3"):
        ctx.commit({("t", 0): len(g) * 10}, group_id=g)
    r = ctx.reply(
        ctx.call(OffsetFetch(tuple(FetchGroup(g, (FetchTopic("t", (0,)),)) for g in ("g3", "g1"))))
    )
    assert isinstance(r, OffsetFetchResponse)
    assert [g.group_id for g in r.groups] == ["g3", "g1"]


def test_metadata_too_large_counts_utf16_units() -> None:
    ctx = Ctx()
    ok = "x" * 4096
    emoji = "\U0001f600" * 2049  # 2049 code points, 4098 UTF-16 units
    t = ctx.call(
        OffsetCommit(
            "g",
            (
                CommitTopic(
                    "t",
                    (
                        CommitPartition(0, 1, -1, ok),
                        CommitPartition(1, 1, -1, ok + "y"),
                        CommitPartition(2, 1, -1, emoji),
                    ),
                ),
            ),
        )
    )
    assert commit_errors(ctx, t) == {("t", 0): 0, ("t", 1): TOO_LARGE, ("t", 2): TOO_LARGE}
    assert len(ctx.records) == 1


def test_commit_validation_in_a_stable_group() -> None:
    ctx = Ctx()
    (a, _b), gen = ctx.stable_group(2)
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, "nobody", gen)) == {
        ("t", 0): UNKNOWN_MEMBER
    }
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, a, gen + 1)) == {("t", 0): ILLEGAL_GEN}
    assert commit_errors(ctx, ctx.commit({("t", 0): 1})) == {("t", 0): UNKNOWN_MEMBER}
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, a, gen)) == {("t", 0): 0}


def test_commit_counts_as_heartbeat() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    for i in range(5):
        ctx.sleep(9000)
        assert commit_errors(ctx, ctx.commit({("t", 0): i}, a, gen)) == {("t", 0): 0}
    assert ctx.state() is S.STABLE


def test_commit_during_preparing_is_accepted_and_during_completing_is_not() -> None:
    ctx = Ctx()
    (a, b), gen = ctx.stable_group(2)
    ctx.join(a)
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, b, gen)) == {("t", 0): 0}
    ctx.join(b)
    assert ctx.state() is S.COMPLETING_REBALANCE
    assert commit_errors(ctx, ctx.commit({("t", 0): 2}, b, gen + 1)) == {("t", 0): REBALANCING}


def test_retention_time_writes_v1_with_expire_timestamp() -> None:
    ctx = Ctx(small_retention())
    topics = (CommitTopic("t", (CommitPartition(0, 9),)),)
    ctx.call(OffsetCommit("g", topics, retention_time_ms=5000))
    value = ctx.records[-1].value
    assert isinstance(value, OffsetCommitValue)
    assert value.expire_timestamp == ctx.now + 5000
    assert (serialize(ctx.records[-1].key, value)[1] or b"")[:2] == b"\x00\x01"
    ctx.sleep(10_000)  # next retention check: explicit expire timestamp passed
    assert fetch(ctx, topics={"t": (0,)}).topics[0].partitions[0].committed_offset == -1


# ---------------------------------------------------------------------- retention


def test_simple_group_offsets_expire_from_commit_time_and_group_dies() -> None:
    ctx = Ctx(small_retention())
    ctx.commit({("t", 0): 1})
    ctx.sleep(59_999)
    assert fetch(ctx).topics
    ctx.sleep(10_000)
    assert fetch(ctx).topics == ()
    assert ctx.coord.group_summary("g") is None
    assert ctx.records[-1].value is None  # offset tombstone; no group tombstone (generation 0)
    assert ctx.shard().hard.groups == {}
    ctx.check_replay()


def test_empty_group_offsets_expire_from_when_it_became_empty() -> None:
    ctx = Ctx(small_retention())
    (a,), gen = ctx.stable_group(1)
    ctx.commit({("t", 0): 1}, a, gen)
    for _ in range(10):
        ctx.sleep(5000)
        ctx.heartbeat(a, gen)
    ctx.leave(a)
    emptied = ctx.now
    assert ctx.state() is S.EMPTY
    ctx.sleep(55_000)  # 105 s after the commit, 55 s after becoming Empty
    assert fetch(ctx).topics
    ctx.sleep(20_000)
    assert ctx.now - emptied >= 60_000
    assert fetch(ctx).topics == ()
    assert ctx.coord.group_summary("g") is None
    assert ctx.records[-1] == Record(GroupMetadataKey("g"), None, 0)
    ctx.check_replay()


def test_stable_group_keeps_subscribed_topics_and_expires_others() -> None:
    ctx = Ctx(small_retention())
    (a,), gen = ctx.stable_group(1)  # subscribed to "t"
    ctx.commit({("t", 0): 1, ("x", 0): 2}, a, gen)
    for _ in range(30):
        ctx.sleep(3000)
        ctx.heartbeat(a, gen)
    got = {t.name for t in fetch(ctx).topics}
    assert got == {"t"}
    ctx.check_replay()


def test_nothing_expires_while_rebalancing() -> None:
    ctx = Ctx(small_retention())
    (a, b), gen = ctx.stable_group(2)
    ctx.commit({("x", 0): 2}, a, gen)
    ctx.join(a, rebalance_ms=600_000, session_ms=600_000)
    for _ in range(30):
        ctx.sleep(3000)
        ctx.heartbeat(b, gen)
    assert ctx.state() is S.PREPARING_REBALANCE
    assert {t.name for t in fetch(ctx).topics} == {"x"}


# ---------------------------------------------------------------------- delete


def test_offset_delete_in_empty_group_kills_it_when_no_offsets_remain() -> None:
    ctx = Ctx()
    ctx.commit({("t", 0): 1, ("t", 1): 2})
    r = ctx.reply(ctx.call(OffsetDelete("g", (FetchTopic("t", (0,)),))))
    assert r == OffsetDeleteResponse(0, (TopicErrors("t", (PartitionError(0, 0),)),))
    assert ctx.state() is S.EMPTY
    ctx.call(OffsetDelete("g", (FetchTopic("t", (1, 5)),)))
    assert ctx.state() is S.DEAD
    ctx.check_replay()


def test_offset_delete_refuses_subscribed_topics() -> None:
    ctx = Ctx()
    (a,), gen = ctx.stable_group(1)
    ctx.commit({("t", 0): 1, ("x", 0): 1}, a, gen)
    r = ctx.reply(ctx.call(OffsetDelete("g", (FetchTopic("t", (0,)), FetchTopic("x", (0,))))))
    assert r == OffsetDeleteResponse(
        0,
        (
            TopicErrors("t", (PartitionError(0, SUBSCRIBED),)),
            TopicErrors("x", (PartitionError(0, 0),)),
        ),
    )
    assert {t.name for t in fetch(ctx).topics} == {"t"}


def test_offset_delete_non_consumer_group_and_unknown_group() -> None:
    ctx = Ctx()
    tokens = [ctx.join_new(protocol_type="connect")[1]]
    ctx.sleep(3000)
    assert ctx.join_reply(tokens[0]).error_code == 0
    r = ctx.reply(ctx.call(OffsetDelete("g", (FetchTopic("t", (0,)),))))
    assert r == OffsetDeleteResponse(NON_EMPTY)
    r = ctx.reply(ctx.call(OffsetDelete("nope", (FetchTopic("t", (0,)),))))
    assert r == OffsetDeleteResponse(NOT_FOUND)


def test_subscriptions_are_read_from_v0_prefix_of_any_version() -> None:
    ctx = Ctx()
    v3ish = encode_subscription(["t", "u"], b"ud")[:2].replace(b"\x00\x00", b"\x00\x03")
    v3ish += encode_subscription(["t", "u"], b"ud")[2:] + b"\x00\x00\x00\x00"  # trailing fields
    tokens = [ctx.join_new(protocols=(("range", v3ish),))[1]]
    ctx.sleep(3000)
    r = ctx.join_reply(tokens[0])
    ctx.sync(r.member_id, r.generation_id)
    assert ctx.describe().subscribed_topics == frozenset({"t", "u"})


def test_empty_group_accepts_negative_generation_even_with_member_id() -> None:
    ctx = Ctx()
    (a,), _ = ctx.stable_group(1)
    ctx.leave(a)
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, "whoever", -1)) == {("t", 0): 0}
    assert commit_errors(ctx, ctx.commit({("t", 0): 1}, "whoever", 3)) == {("t", 0): UNKNOWN_MEMBER}
