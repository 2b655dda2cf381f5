"""``samsa.Consumer(group_protocol="consumer")`` against a real broker: members join and
leave a KIP-848 group, the rebalance listener is called incrementally (a member only
revokes what moves, and a partition is assigned only after its previous owner revoked it),
every record is consumed and the commits equal the end offsets; a static member comes back
to its partitions; fencing; option checks."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import Admin, Consumer, KafkaError
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.conftest import wait_until
from tests.client.cpgroups import (
    Timeline,
    commits_equal_end_offsets,
    cp_consumer,
    describe,
    never_two_owners,
    produce,
    split,
)
from tests.client.proxy import Close, FaultProxy, error_answer
from tests.client.runner import Runner
from tests.conformance.consumer_protocol_kit import BROKER_CONFIG

_names = itertools.count()


def test_members_join_and_leave_incrementally(cp_broker: BrokerProcess,
                                              cp_topic: Callable[[int], str],
                                              runners: list[Runner]) -> None:
    topic, group = cp_topic(6), f"cp-g-{next(_names)}"
    parts = {TopicPartition(topic, p) for p in range(6)}
    log: list[tuple[float, str, str, frozenset[TopicPartition]]] = []
    expected = produce(cp_broker, topic, 60, "a")

    def member(name: str) -> Runner:
        r = Runner(cp_consumer(cp_broker, group, client_id=name), [topic], commit=True,
                   listener=Timeline(name, log))
        runners.append(r)
        r.start()
        return r

    a, b = member("a"), member("b")
    wait_until(lambda: split([a, b], parts), 30, describe=lambda: describe([a, b]))
    c = member("c")
    wait_until(lambda: split([a, b, c], parts) and all(len(r.assignment) == 2
                                                       for r in (a, b, c)),
               30, describe=lambda: describe([a, b, c]))
    expected |= produce(cp_broker, topic, 60, "b")
    # Incremental: when c joined, a and b revoked only what moved to c.
    for r in (a, b):
        kinds = r.listener.kinds()
        assert "lost" not in kinds
        revoked = [p for k, p in r.listener.calls if k == "revoked"]
        assert revoked and all(len(p) < 6 for p in revoked)
    assert c.listener.calls[0][0] == "assigned" and "revoked" not in c.listener.kinds()
    # A member epoch is a positive number once joined.
    assert all(r.consumer.generation > 0 for r in (a, b, c))
    assert len({r.consumer.member_id for r in (a, b, c)}) == 3

    b.stop()  # unsubscribe: revoke, then leave with epoch -1
    assert b.listener.calls[-1][0] == "revoked"
    wait_until(lambda: split([a, c], parts), 30, describe=lambda: describe([a, c]))
    expected |= produce(cp_broker, topic, 60, "c")
    seen = lambda: {r.value for x in (a, b, c) for r in x.records}  # noqa: E731
    wait_until(lambda: seen() >= expected, 30)
    assert seen() == expected
    for r in (a, c):
        r.consumer.commit()
    wait_until(lambda: commits_equal_end_offsets(cp_broker, group, parts), 20)
    never_two_owners(log)
    with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
        desc = admin.describe_groups([group])[group]
        assert desc.state == "Stable" and len(desc.members) == 2


def test_auto_commit_before_revocation(cp_broker: BrokerProcess,
                                       cp_topic: Callable[[int], str],
                                       runners: list[Runner]) -> None:
    """With auto-commit, a member commits what it consumed before it revokes: the member
    taking the partitions over starts there, so no record is read twice."""
    topic, group = cp_topic(4), f"cp-g-{next(_names)}"
    parts = {TopicPartition(topic, p) for p in range(4)}
    expected = produce(cp_broker, topic, 80, "x")
    a = Runner(cp_consumer(cp_broker, group, enable_auto_commit=True,
                           auto_commit_interval_ms=60000), [topic])
    runners.append(a)
    a.start()
    wait_until(lambda: len(a.records) == 80, 30, describe=lambda: describe([a]))
    b = Runner(cp_consumer(cp_broker, group, enable_auto_commit=True,
                           auto_commit_interval_ms=60000), [topic])
    runners.append(b)
    b.start()
    wait_until(lambda: split([a, b], parts), 30, describe=lambda: describe([a, b]))
    expected |= produce(cp_broker, topic, 40, "y")
    both = lambda: [r.value for x in (a, b) for r in x.records]  # noqa: E731
    wait_until(lambda: set(both()) >= expected, 30)
    assert sorted(both()) == sorted(expected), "no record consumed twice"


def test_static_member_comes_back_to_its_partitions(cp_broker: BrokerProcess,
                                                    cp_topic: Callable[[int], str],
                                                    runners: list[Runner]) -> None:
    topic, group = cp_topic(4), f"cp-g-{next(_names)}"
    parts = {TopicPartition(topic, p) for p in range(4)}
    a = Runner(cp_consumer(cp_broker, group, group_instance_id="a"), [topic])
    b = Runner(cp_consumer(cp_broker, group, group_instance_id="b"), [topic])
    runners.extend([a, b])
    a.start()
    b.start()
    wait_until(lambda: split([a, b], parts), 30, describe=lambda: describe([a, b]))
    held = a.assignment
    before = len(b.listener.kinds())  # b may have revoked while a first joined
    a.stop()  # a static member leaves with epoch -2: the group keeps its partitions
    time.sleep(0.5)
    assert b.assignment == parts - held, "nobody took the static member's partitions"
    again = Runner(cp_consumer(cp_broker, group, group_instance_id="a"), [topic])
    runners.append(again)
    again.start()
    wait_until(lambda: split([again, b], parts), 30, describe=lambda: describe([again, b]))
    assert again.assignment == held
    assert "revoked" not in b.listener.kinds()[before:]


@pytest.fixture
def cp_proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    """A consumer-protocol broker of the test's own behind a :class:`FaultProxy`."""
    proxy = FaultProxy()
    proc = BrokerProcess(tmp_path / "data", {**BROKER_CONFIG, "advertised.port": str(proxy.port)})
    proc.start()
    proxy.start(("127.0.0.1", proc.port))
    yield proc, proxy
    proxy.close()
    proc.stop()


def test_fenced_member_reports_lost_and_rejoins(
        cp_proxied: tuple[BrokerProcess, FaultProxy], runners: list[Runner]) -> None:
    """Heartbeats refused for longer than the session: the coordinator drops the member,
    whose next heartbeat is fenced; its partitions are reported lost (not revoked) and it
    joins again at epoch 0 with its member id."""
    proc, proxy = cp_proxied
    with Admin(bootstrap_servers=proxy.address) as admin:
        admin.create_topics({"f": 2})
    parts = {TopicPartition("f", p) for p in range(2)}
    a = Runner(cp_consumer(proc, "fenced", bootstrap_servers=proxy.address), ["f"])
    runners.append(a)
    a.start()
    wait_until(lambda: split([a], parts), 30, describe=lambda: describe([a]))
    member_id, epoch = a.consumer.member_id, a.consumer.generation
    proxy.always(ApiKey.CONSUMER_GROUP_HEARTBEAT, Close())
    time.sleep(5.0)  # group.consumer.session.timeout.ms is 4000
    proxy.always(ApiKey.CONSUMER_GROUP_HEARTBEAT, None)
    wait_until(lambda: "lost" in a.listener.kinds() and split([a], parts), 30,
               describe=lambda: describe([a]))
    assert a.listener.kinds().count("revoked") == 0
    assert a.consumer.member_id == member_id and a.consumer.generation > epoch
    history = " ".join(a.consumer.group_status().history)  # type: ignore[union-attr]
    assert "FENCED -> JOINING" in history


def test_commit_retries_a_stale_member_epoch(
        cp_proxied: tuple[BrokerProcess, FaultProxy], runners: list[Runner]) -> None:
    """OffsetCommit v9 carries the member id and epoch; STALE_MEMBER_EPOCH is retried by
    ``commit()`` (with the latest epoch) and handed to ``commit_async``'s callback."""
    proc, proxy = cp_proxied
    with Admin(bootstrap_servers=proxy.address) as admin:
        admin.create_topics({"s": 1})
    tp = TopicPartition("s", 0)
    with cp_consumer(proc, "stale", bootstrap_servers=proxy.address) as c:
        c.subscribe(["s"])
        wait_until(lambda: not c.poll(50) and c.member_state == "STABLE", 20)
        commits: list[Any] = []
        stale = error_answer(ErrorCode.stale_member_epoch)

        def first_stale(req: Any) -> Any:
            commits.append(req)
            return stale(req) if len(commits) == 1 else None

        proxy.always(ApiKey.OFFSET_COMMIT, first_stale)
        c.commit({tp: 0})
        proxy.always(ApiKey.OFFSET_COMMIT, None)
        assert len(commits) == 2 and commits[-1].api_version == 9
        assert commits[-1].body.member_id == c.member_id
        assert commits[-1].body.generation_id_or_member_epoch == c.generation > 0
        proxy.inject(ApiKey.OFFSET_COMMIT, error_answer(ErrorCode.stale_member_epoch))
        errors: list[BaseException | None] = []
        c.commit_async({tp: 0}, lambda _, exc: errors.append(exc))
        wait_until(lambda: bool(c.poll(20)) or bool(errors), 10)
        assert isinstance(errors[0], KafkaError)
        assert errors[0].code == ErrorCode.stale_member_epoch
        assert c.committed(tp) == 0


def test_unknown_assignor_is_fatal(cp_broker: BrokerProcess,
                                   cp_topic: Callable[[int], str]) -> None:
    topic = cp_topic(1)
    with cp_consumer(cp_broker, f"cp-g-{next(_names)}", group_remote_assignor="nope") as c:
        c.subscribe([topic])
        with pytest.raises(KafkaError) as err:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                c.poll(100)
        assert err.value.code == ErrorCode.unsupported_assignor
        assert c.member_state == "FATAL"


def test_server_assignor_range(cp_broker: BrokerProcess, cp_topic: Callable[[int], str],
                               runners: list[Runner]) -> None:
    """Co-partitioned topics with ``range``: each member gets the same partition numbers
    of both topics."""
    t1, t2, group = cp_topic(4), cp_topic(4), f"cp-g-{next(_names)}"
    parts = {TopicPartition(t, p) for t in (t1, t2) for p in range(4)}
    rs = [Runner(cp_consumer(cp_broker, group, group_remote_assignor="range"), [t1, t2])
          for _ in range(2)]
    runners.extend(rs)
    for r in rs:
        r.start()
    wait_until(lambda: split(rs, parts), 30, describe=lambda: describe(rs))
    for r in rs:
        by_topic = {t: {tp.partition for tp in r.assignment if tp.topic == t} for t in (t1, t2)}
        assert by_topic[t1] == by_topic[t2]


@pytest.mark.parametrize(("config", "message"), [
    ({"group_protocol": "consumer", "partition_assignment_strategy": ["range"]},
     "partition_assignment_strategy cannot be set"),
    ({"group_protocol": "consumer", "session_timeout_ms": 10000}, "session_timeout_ms"),
    ({"group_protocol": "consumer", "heartbeat_interval_ms": 100}, "heartbeat_interval_ms"),
    ({"group_remote_assignor": "uniform"}, "cannot be set when group_protocol='classic'"),
    ({"group_protocol": "classic", "group_remote_assignor": "range"}, "group_remote_assignor"),
    ({"group_protocol": "kip848"}, "group_protocol must be"),
    ({"group_protocol": "consumer", "group_remote_assignor": ""}, "name of a broker assignor"),
])
def test_option_checks(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", **config)


def test_consumer_protocol_option_spelling() -> None:
    with Consumer(bootstrap_servers="127.0.0.1:1", group_id="g",
                  group_protocol="CONSUMER", group_remote_assignor="uniform") as c:
        assert c.config["group_protocol"] == "consumer"
        assert c.member_state == "UNSUBSCRIBED" and c.generation == 0


def test_threads_end_with_close(cp_broker: BrokerProcess,
                                cp_topic: Callable[[int], str]) -> None:
    topic = cp_topic(1)
    before = threading.active_count()
    c = cp_consumer(cp_broker, f"cp-g-{next(_names)}")
    c.subscribe([topic])
    wait_until(lambda: bool(c.poll(50)) or c.member_state == "STABLE", 20)
    c.close()
    wait_until(lambda: threading.active_count() <= before, 10)


def test_regex_subscription_picks_up_new_topics(cp_broker: BrokerProcess,
                                                runners: list[Runner]) -> None:
    """``subscribe(pattern=...)`` sends ``subscribed_topic_regex``: the broker resolves it,
    also for a topic created later (whose id the consumer learns from metadata)."""
    prefix = f"rx{next(_names)}"
    with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
        admin.create_topics({f"{prefix}-a": 2, f"other{prefix}": 1})
    a = Runner(cp_consumer(cp_broker, f"cp-g-{next(_names)}"), pattern=f"{prefix}-.*")
    runners.append(a)
    a.start()
    first = {TopicPartition(f"{prefix}-a", p) for p in range(2)}
    wait_until(lambda: split([a], first), 30, describe=lambda: describe([a]))
    with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
        admin.create_topics({f"{prefix}-b": 1})
    both = first | {TopicPartition(f"{prefix}-b", 0)}
    wait_until(lambda: split([a], both), 30, describe=lambda: describe([a]))
    values = produce(cp_broker, f"{prefix}-b", 5, "rx")
    wait_until(lambda: {r.value for r in a.records} >= values, 20)
