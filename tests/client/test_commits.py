"""Offset commit paths of samsa.Consumer: periodic auto-commit, commit_async callbacks,
CommitFailedError once the group moved on, and the retries of a synchronous commit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client import Admin, CommitFailedError, Consumer, KafkaError, Producer
from samsa.protocol.api_keys import ApiKey
from tests.brokerproc import BrokerProcess
from tests.client.groups import all_tps
from tests.client.proxy import FaultProxy, error_answer

pytestmark = pytest.mark.slow

LOAD_IN_PROGRESS = ErrorCode.coordinator_load_in_progress
NOT_COORDINATOR, ILLEGAL_GENERATION = ErrorCode.not_coordinator, ErrorCode.illegal_generation


def produce(bootstrap: str, topic: str, start: int, n: int, partitions: int = 2) -> None:
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(start, start + n):
            p.send(topic, value=b"%d" % i, partition=i % partitions)


def consumer(bootstrap: str, group: str, **kw: Any) -> Consumer:
    config: dict[str, Any] = {"bootstrap_servers": bootstrap, "group_id": group,
                              "auto_offset_reset": "earliest", "session_timeout_ms": 6000,
                              "heartbeat_interval_ms": 500, "max_poll_interval_ms": 30_000,
                              "enable_auto_commit": False}
    config.update(kw)
    return Consumer(**config)


def consume(c: Consumer, n: int, rounds: int = 150) -> list[Any]:
    out: list[Any] = []
    for _ in range(rounds):
        out += c.poll(100)
        if len(out) >= n:
            break
    assert len(out) == n, f"consumed {len(out)} of {n}"
    return out


def committed(admin: Admin, group: str) -> dict[TopicPartition, int]:
    return admin.list_consumer_group_offsets(group)


class Callbacks:
    """commit_async callback that records (offsets, exception) pairs."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[TopicPartition, Any], BaseException | None]] = []
        self.thread: list[str] = []

    def __call__(self, offsets: dict[TopicPartition, Any], exc: BaseException | None) -> None:
        self.calls.append((offsets, exc))
        self.thread.append(threading.current_thread().name)


def poll_until(c: Consumer, cond: Callable[[], bool], rounds: int = 100) -> None:
    for _ in range(rounds):
        if cond():
            return
        c.poll(100)
    assert cond()


def test_periodic_auto_commit(broker: BrokerProcess, admin: Admin,
                              topic: Callable[[int], str], group: str) -> None:
    t = topic(2)
    produce(broker.bootstrap, t, 0, 30)
    with consumer(broker.bootstrap, group, enable_auto_commit=True,
                  auto_commit_interval_ms=300) as c:
        c.subscribe([t])
        consume(c, 30)
        generation = c.generation
        # Only the interval commits: no commit(), no rebalance, no close.
        poll_until(c, lambda: committed(admin, group) == dict.fromkeys(all_tps(t, 2), 15))
        produce(broker.bootstrap, t, 30, 10)
        consume(c, 10)
        poll_until(c, lambda: committed(admin, group) == dict.fromkeys(all_tps(t, 2), 20))
        assert c.generation == generation


def test_commit_async_callback_runs_in_poll(broker: BrokerProcess, admin: Admin,
                                           topic: Callable[[int], str], group: str) -> None:
    t = topic(2)
    produce(broker.bootstrap, t, 0, 20)
    with consumer(broker.bootstrap, group) as c:
        c.subscribe([t])
        consume(c, 20)
        cb = Callbacks()
        fut = c.commit_async(callback=cb)
        fut.result(10)
        assert cb.calls == []  # callbacks run on the user's thread, in a later poll
        poll_until(c, lambda: bool(cb.calls))
        assert cb.calls == [(dict.fromkeys(all_tps(t, 2), 10), None)]
        assert cb.thread == [threading.current_thread().name]
        assert committed(admin, group) == dict.fromkeys(all_tps(t, 2), 10)


def remove_member(admin: Admin, group: str, member_id: str) -> None:
    """Remove a member as an administrator would (LeaveGroup on its behalf)."""
    admin.remove_group_members(group, [member_id], reason="test")


def test_commit_fails_after_the_member_was_removed(broker: BrokerProcess, admin: Admin,
                                                   topic: Callable[[int], str],
                                                   group: str) -> None:
    t = topic(2)
    produce(broker.bootstrap, t, 0, 20)
    with consumer(broker.bootstrap, group, heartbeat_interval_ms=2000) as c:
        c.subscribe([t])
        consume(c, 20)
        c.commit({TopicPartition(t, 0): 5})
        old = c.member_id
        remove_member(admin, group, old)
        with pytest.raises(CommitFailedError):
            c.commit()
        cb = Callbacks()
        c.commit_async(callback=cb)
        poll_until(c, lambda: bool(cb.calls))
        assert isinstance(cb.calls[0][1], CommitFailedError)
        assert committed(admin, group) == {TopicPartition(t, 0): 5}  # nothing else landed
        # The next polls join the group again as a new member; commits work again.
        poll_until(c, lambda: c.member_state == "STABLE" and not c.rejoin_pending)
        assert c.member_id != old
        c.commit({tp: 10 for tp in all_tps(t, 2)})
        assert committed(admin, group) == dict.fromkeys(all_tps(t, 2), 10)


def test_commit_fails_once_the_generation_moved_on(
        proxied: tuple[BrokerProcess, FaultProxy], group: str) -> None:
    proc, proxy = proxied
    with consumer(proxy.address, group) as c, Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"moved": 2})
        produce(proxy.address, "moved", 0, 20)
        c.subscribe(["moved"])
        consume(c, 20)
        generation = c.generation
        proxy.inject(ApiKey.OFFSET_COMMIT, error_answer(ILLEGAL_GENERATION))
        with pytest.raises(CommitFailedError):
            c.commit()
        assert c.generation == -1 and c.rejoin_pending  # the member joins again
        # Its partitions were lost, not revoked: it reads them again from the last
        # committed offsets (none here), and its commit then lands.
        assert len(consume(c, 20)) == 20
        assert c.member_state == "STABLE" and c.generation > generation
        c.commit()
        assert committed(admin, group) == dict.fromkeys(all_tps("moved", 2), 10)


def test_commit_retries_load_in_progress_and_not_coordinator(
        proxied: tuple[BrokerProcess, FaultProxy], group: str) -> None:
    proc, proxy = proxied
    with consumer(proxy.address, group) as c, Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"retry": 2})
        produce(proxy.address, "retry", 0, 20)
        c.subscribe(["retry"])
        consume(c, 20)
        commits, lookups = proxy.seen[ApiKey.OFFSET_COMMIT], proxy.seen[ApiKey.FIND_COORDINATOR]
        proxy.inject(ApiKey.OFFSET_COMMIT, error_answer(LOAD_IN_PROGRESS),
                     error_answer(NOT_COORDINATOR), error_answer(LOAD_IN_PROGRESS))
        c.commit()
        assert proxy.seen[ApiKey.OFFSET_COMMIT] - commits == 4  # three answered by the proxy
        assert proxy.seen[ApiKey.FIND_COORDINATOR] > lookups  # NOT_COORDINATOR: looked up again
        assert committed(admin, group) == dict.fromkeys(all_tps("retry", 2), 10)
        assert c.member_state == "STABLE" and not c.rejoin_pending  # no rebalance for it


def test_commit_async_reports_a_retriable_error_to_its_callback(
        proxied: tuple[BrokerProcess, FaultProxy], group: str) -> None:
    proc, proxy = proxied
    with consumer(proxy.address, group) as c, Admin(bootstrap_servers=proc.bootstrap) as admin:
        admin.create_topics({"async": 2})
        produce(proxy.address, "async", 0, 20)
        c.subscribe(["async"])
        consume(c, 20)
        proxy.inject(ApiKey.OFFSET_COMMIT, error_answer(NOT_COORDINATOR))
        cb = Callbacks()
        c.commit_async(callback=cb)
        poll_until(c, lambda: bool(cb.calls))
        (offsets, exc), = cb.calls
        assert offsets == dict.fromkeys(all_tps("async", 2), 10)
        assert isinstance(exc, KafkaError) and exc.code == NOT_COORDINATOR and exc.retriable
        assert not isinstance(exc, CommitFailedError)
        # The coordinator was marked unknown and is found again; the next commit lands.
        c.commit()


def test_commits_and_auto_commit_with_assign_and_a_group_id(broker: BrokerProcess,
                                                            admin: Admin,
                                                            topic: Callable[[int], str],
                                                            group: str) -> None:
    """A consumer with ``assign()`` and a ``group_id`` joins no group but commits as a
    "simple" member (generation -1, no member id): auto-commit, ``commit()`` and
    ``commit(offsets)`` all land, and the group stays Empty with no members."""
    t = topic(2)
    produce(broker.bootstrap, t, 0, 10)
    tp0, tp1 = TopicPartition(t, 0), TopicPartition(t, 1)
    with consumer(broker.bootstrap, group, enable_auto_commit=True,
                  auto_commit_interval_ms=100) as c:
        c.assign([tp0, tp1])
        consume(c, 10)
        poll_until(c, lambda: committed(admin, group) == {tp0: 5, tp1: 5})
        assert c.member_state == "UNJOINED" and c.generation == -1
        c.commit({tp0: (2, "two")})
        assert committed(admin, group)[tp0] == 2
        assert c.committed_metadata(tp0) == (2, "two")
        c.commit()
        assert committed(admin, group) == {tp0: 5, tp1: 5}
    description = admin.describe_groups([group])[group]
    assert admin.list_groups().get(group) == "Empty" and not description.members
