"""Groups and committed offsets survive a broker restart (clean stop and kill -9): offsets
fetched afterwards equal those committed (metadata included), a new consumer resumes from
them, and a member that stayed up across the restart carries on in its loaded group."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import (
    Member,
    create_topic,
    drain,
    end_offsets,
    generation_of,
    produce,
    settle,
    tps_of,
    wait_until,
)

pytestmark = pytest.mark.conformance

TOPIC, PARTS = "restart", 3
COMMITS = {0: 4, 1: 7, 2: 10}


def _offsets(admin: AdminClient, group: str) -> dict[int, tuple[int, str]]:
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(PARTS)])
    res = admin.list_consumer_group_offsets([req])[group].result(15)
    return {tp.partition: (tp.offset, tp.metadata) for tp in res.topic_partitions}


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_groups_and_offsets_survive_restart(fresh_broker: BrokerProcess, how: str) -> None:
    fresh_broker.start()
    bootstrap = fresh_broker.bootstrap
    create_topic(bootstrap, TOPIC, PARTS)
    produce(bootstrap, TOPIC, PARTS, 10)
    every = tps_of(TOPIC, PARTS)

    # Group "parked": commits explicit offsets with metadata, then leaves (Empty).
    parked = Member(bootstrap, "parked", "parked").subscribe([TOPIC])
    settle([parked], every)
    parked.consumer.commit(offsets=[TopicPartition(TOPIC, p, o, metadata=f"m{p}")
                                    for p, o in COMMITS.items()], asynchronous=False)
    parked.close()
    # Group "live": one member that stays up across the restart.
    live = Member(bootstrap, "live", "live", **{"session.timeout.ms": 10000}).subscribe([TOPIC])
    resumed: Member | None = None
    try:
        settle([live], every)
        drain([live], end_offsets(bootstrap, TOPIC, PARTS))
        assert live.commit()
        member_id = live.consumer.memberid()
        generation = generation_of(bootstrap, "live", member_id)

        if how == "stop":
            assert fresh_broker.stop() == 0
        else:
            fresh_broker.kill()
        fresh_broker.start()
        admin = AdminClient({"bootstrap.servers": bootstrap})

        assert _offsets(admin, "parked") == {p: (o, f"m{p}") for p, o in COMMITS.items()}
        listed = {g.group_id: g.state for g in admin.list_consumer_groups().result(15).valid}
        assert listed.get("parked") == ConsumerGroupState.EMPTY

        # The member that stayed up keeps consuming and committing in the loaded group.
        new = produce(bootstrap, TOPIC, PARTS, 2, "after")
        wait_until(lambda: (live.poll(), new <= set(live.seen))[1],
                   what="the surviving member consumes after the restart")
        drain([live], end_offsets(bootstrap, TOPIC, PARTS))
        wait_until(live.commit, what="commit after restart")
        assert {p: o for p, (o, _) in _offsets(admin, "live").items()} == {
            p: off for (_, p), off in end_offsets(bootstrap, TOPIC, PARTS).items()}
        described = admin.describe_consumer_groups(["live"])["live"].result(15)
        assert described.state == ConsumerGroupState.STABLE
        assert [m.client_id for m in described.members] == ["live"]
        # Loaded from __consumer_offsets, not rebuilt: same member, same generation.
        assert live.consumer.memberid() == member_id
        assert generation_of(bootstrap, "live", member_id) == generation

        # A new consumer of "parked" resumes exactly at the committed offsets.
        resumed = Member(bootstrap, "parked", "resumed").subscribe([TOPIC])
        firsts: dict[int, int] = {}

        def first_offsets() -> bool:
            for m in resumed.consumer.consume(100, timeout=0.05):
                if m.error() is None:
                    firsts.setdefault(m.partition(), m.offset())
            return len(firsts) == PARTS

        wait_until(first_offsets, what="the resumed consumer's first records")
        assert firsts == COMMITS
    finally:
        live.close()
        if resumed is not None:
            resumed.close()
