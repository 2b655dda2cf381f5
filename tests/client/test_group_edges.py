"""Edges of the classic group client against a real broker, most through the FaultProxy:
answers for another protocol, an assignment outside the subscription, FindCoordinator
failures, listener exceptions, refused configurations, ``assign``/``subscribe``, and the
fetch pipeline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.assignors import PartitionAssignor, Subscription
from samsa.client import Admin, Consumer, IllegalStateError, KafkaError, Producer
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.codec import Request
from tests.brokerproc import BrokerProcess
from tests.client.groups import all_tps, make
from tests.client.proxy import Close, Delay, FaultProxy, answer

pytestmark = pytest.mark.slow

INCONSISTENT = ErrorCode.inconsistent_group_protocol


def net_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name.startswith("samsa-net-"))


def poll_until_raises(c: Consumer, rounds: int = 100) -> BaseException:
    for _ in range(rounds):
        try:
            c.poll(100)
        except Exception as exc:
            return exc
    raise AssertionError("poll never raised")


# ---- answers the member did not ask for ----------------------------------------------------


def test_sync_answer_for_another_protocol_raises_from_poll(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    proxy.inject(ApiKey.SYNC_GROUP, answer(error_code=0, protocol_type="consumer",
                                           protocol_name="roundrobin", assignment=b""))
    with make(proc, "g-sync", bootstrap_servers=proxy.address) as c:
        c.subscribe(["t"])
        exc = poll_until_raises(c)
        assert isinstance(exc, KafkaError) and exc.code == INCONSISTENT, exc
        assert "'roundrobin'" in str(exc) and not c.assignment()
        with pytest.raises(KafkaError):
            c.poll(100)


def test_join_answer_for_another_protocol_type_raises_from_poll(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    proxy.inject(ApiKey.JOIN_GROUP, answer(error_code=0, generation_id=1,
                                           protocol_type="connect", protocol_name="range",
                                           leader="m-1", member_id="m-1", members=[]))
    with make(proc, "g-join", bootstrap_servers=proxy.address) as c:
        c.subscribe(["t"])
        exc = poll_until_raises(c)
        assert isinstance(exc, KafkaError) and exc.code == INCONSISTENT, exc
        assert "'connect'" in str(exc)
        assert proxy.seen[ApiKey.SYNC_GROUP] == 0


class GivesEverything(PartitionAssignor):
    """A wrong custom strategy: every member gets every partition of every topic any
    member subscribes to."""

    name = "gives-everything"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> Mapping[str, Sequence[TopicPartition]]:
        every = [TopicPartition(t, p) for t, n in partitions_per_topic.items()
                 for p in range(n)]
        return dict.fromkeys(subscriptions, every)


def test_assignment_outside_the_subscription_is_not_installed(
        broker: BrokerProcess, topic: Callable[[int], str], group: str) -> None:
    """The leader gives a follower partitions of a topic the follower does not subscribe
    to: the follower does not take them (nor tell its listener) and rejoins, as Java's
    ConsumerCoordinator does."""
    t, u = topic(2), topic(2)
    heard: list[set[TopicPartition]] = []

    class Listener:
        def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
            heard.append(parts)

        def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
            pass

    with make(broker, group, partition_assignment_strategy=[GivesEverything()]) as leader, \
            make(broker, group, partition_assignment_strategy=[GivesEverything()]) as follower:
        leader.subscribe([t, u])
        for _ in range(100):
            leader.poll(50)
            if leader.assignment():
                break
        follower.subscribe([t], listener=Listener())
        seen: set[TopicPartition] = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            leader.poll(20)
            follower.poll(20)
            seen |= follower.assignment()
        history = " ".join(follower.group_status().history)  # type: ignore[union-attr]
        assert "does not match the subscription" in history
        assert not seen, seen
        assert all(not parts for parts in heard)


# ---- configurations refused before anything starts ------------------------------------------


def test_heartbeat_interval_not_below_the_session_timeout_is_refused() -> None:
    """As Java's consumer ("Heartbeat must be set lower than the session timeout"), at
    construction and before the network thread starts."""
    before = net_threads()
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        Consumer(group_id="g", session_timeout_ms=6000, heartbeat_interval_ms=6000)
    assert net_threads() == before
    Consumer(session_timeout_ms=6000, heartbeat_interval_ms=6000).close()  # no group: unused


def test_unknown_assignor_name_is_refused() -> None:
    before = net_threads()
    with pytest.raises(ValueError, match="'nope'"):
        Consumer(group_id="g", partition_assignment_strategy=["range", "nope"])
    assert net_threads() == before


# ---- FindCoordinator -----------------------------------------------------------------------


def test_failed_coordinator_lookup_refreshes_metadata_then_retries(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    order: list[ApiKey] = []

    def log(req: Request) -> None:
        order.append(ApiKey(req.api_key))

    def refuse(req: Request) -> Close:  # a dropped connection: retriable
        log(req)
        return Close()

    with make(proc, "g-lookup", bootstrap_servers=proxy.address,
              metadata_max_age_ms=300_000) as c:  # no periodic refresh
        c.subscribe(["t"])
        proxy.always(ApiKey.METADATA, log)
        proxy.always(ApiKey.FIND_COORDINATOR, log)
        proxy.inject(ApiKey.FIND_COORDINATOR, refuse)
        for _ in range(20):
            c.poll(2000)  # long enough for both lookups
            if c.assignment():
                break
        assert c.assignment() == {TopicPartition("t", 0)}
    first = order.index(ApiKey.FIND_COORDINATOR)
    second = order.index(ApiKey.FIND_COORDINATOR, first + 1)
    assert ApiKey.METADATA in order[first:second], order


def test_group_authorization_failure_of_the_lookup_surfaces_from_poll(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    proxy.always(ApiKey.FIND_COORDINATOR, answer(coordinators=[{
        "key": "g-auth", "node_id": -1, "host": "", "port": -1,
        "error_code": ErrorCode.group_authorization_failed}]))
    with make(proc, "g-auth", bootstrap_servers=proxy.address) as c:
        c.subscribe(["t"])
        exc = poll_until_raises(c)
        assert isinstance(exc, KafkaError) and exc.code == ErrorCode.group_authorization_failed
        with pytest.raises(KafkaError):  # fatal: every later poll raises it too
            c.poll(100)
        assert proxy.seen[ApiKey.FIND_COORDINATOR] == 1  # not retried


def test_lookup_answer_without_a_coordinator_is_an_error(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    proc, proxy = proxied
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    proxy.always(ApiKey.FIND_COORDINATOR, answer(coordinators=[]))
    with make(proc, "g-none", bootstrap_servers=proxy.address) as c:
        c.subscribe(["t"])
        exc = poll_until_raises(c)
        assert isinstance(exc, KafkaError), repr(exc)
        assert "no coordinator for group 'g-none'" in str(exc)


# ---- listeners, subscriptions, fetching ------------------------------------------------------


class Boom:
    """A rebalance listener that raises the first time each method is called."""

    def __init__(self) -> None:
        self.raised: set[str] = set()

    def _once(self, what: str) -> None:
        if what not in self.raised:
            self.raised.add(what)
            raise RuntimeError(f"boom in {what}")

    def on_partitions_assigned(self, parts: set[TopicPartition]) -> None:
        if parts:
            self._once("assigned")

    def on_partitions_revoked(self, parts: set[TopicPartition]) -> None:
        self._once("revoked")


def test_listener_exception_surfaces_from_poll(broker: BrokerProcess,
                                               topic: Callable[[int], str],
                                               group: str) -> None:
    """Kafka's consumer throws a listener's exception from ``poll`` once the partition
    change is applied; the member carries on with the next poll."""
    t = topic(2)
    with make(broker, group) as c, make(broker, group) as other:
        c.subscribe([t], listener=Boom())
        exc = poll_until_raises(c)
        assert isinstance(exc, RuntimeError) and str(exc) == "boom in assigned"
        assert c.assignment() == all_tps(t, 2)  # applied before the listener ran
        c.poll(100)
        assert c.member_state == "STABLE"
        other.subscribe([t])
        stop = threading.Event()
        thread = threading.Thread(target=lambda: [other.poll(50) for _ in iter(
            stop.is_set, True)], daemon=True)
        thread.start()
        try:
            exc = poll_until_raises(c)
            assert isinstance(exc, RuntimeError) and str(exc) == "boom in revoked"
            assert not c.assignment()  # eager: revoked whatever the listener did
            for _ in range(100):
                c.poll(50)
                if c.member_state == "STABLE" and len(c.assignment()) == 1:
                    break
            assert len(c.assignment()) == 1
        finally:
            stop.set()
            thread.join(10)


def test_assign_and_subscribe_exclude_each_other(broker: BrokerProcess,
                                                 topic: Callable[[int], str],
                                                 group: str) -> None:
    t = topic(1)
    tp = TopicPartition(t, 0)
    with make(broker, group) as c:
        c.subscribe([t])
        with pytest.raises(IllegalStateError):
            c.assign([tp])
        c.unsubscribe()
        c.assign([tp])
        with pytest.raises(IllegalStateError):
            c.subscribe([t])
        with pytest.raises(IllegalStateError):
            c.subscribe(pattern="t.*")
        c.unsubscribe()
        c.subscribe([t])
        assert c.subscription() == {t}


def five_records(proc: BrokerProcess) -> TopicPartition:
    """Topic ``t`` with one partition holding records 0-4."""
    with Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"t": 1})
    with Producer(bootstrap_servers=proc.bootstrap) as p:
        for i in range(5):
            p.send("t", value=b"%d" % i, partition=0)
    return TopicPartition("t", 0)


def test_next_fetch_is_in_flight_while_records_are_returned(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """Kafka's pipelining: before ``poll`` returns records it sends the next Fetch, so
    the broker works on it while the application processes the batch."""
    proc, proxy = proxied
    tp = five_records(proc)
    with Consumer(bootstrap_servers=proxy.address, auto_offset_reset="earliest",
                  fetch_max_wait_ms=5000) as c:
        c.assign([tp])
        got = c.poll(10_000)  # the first Fetch carries the records
        assert [r.offset for r in got] == [0, 1, 2, 3, 4]
        deadline = time.monotonic() + 2
        while proxy.seen[ApiKey.FETCH] < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert proxy.seen[ApiKey.FETCH] == 2  # the next one, sent before poll returned


def test_poll_keeps_its_deadline_while_the_offset_fetch_is_slow(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    """The OffsetFetch for new partitions shares the coordinator connection, behind a
    JoinGroup the coordinator may park: poll(200) does not wait for it, and a later poll
    takes its answer (the committed offset) without asking again."""
    proc, proxy = proxied
    tp = five_records(proc)
    with make(proc, "g-slow", bootstrap_servers=proc.bootstrap) as first:
        first.assign([tp])
        first.commit({tp: 3})
    proxy.inject(ApiKey.OFFSET_FETCH, Delay(3.0))
    with make(proc, "g-slow", bootstrap_servers=proxy.address) as c:
        c.assign([tp])
        slowest, got = 0.0, []
        for _ in range(100):
            start = time.monotonic()
            got = c.poll(200)
            slowest = max(slowest, time.monotonic() - start)
            if got:
                break
        assert slowest < 0.2 + 1.0, f"poll(200) took {slowest:.1f}s"
        assert [r.offset for r in got] == [3, 4]
        assert proxy.seen[ApiKey.OFFSET_FETCH] == 1
