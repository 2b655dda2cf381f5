"""The share consumer's pure core: the acknowledgement modes, acknowledgement batches, the
share sessions per partition leader (epochs, piggybacked and committed acknowledgements,
errors that restart a session, closing), and the share group membership driver on a fake
clock and network (ShareGroupHeartbeat bodies, the broker's interval, fencing, leaving)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from uuid import UUID

import pytest
from kio.schema.errors import ErrorCode

from samsa import TopicPartition
from samsa.client.errors import IllegalStateError
from samsa.client.group.share_driver import ShareGroupDriver
from samsa.client.polling import deserialize
from samsa.client.records import ConsumerRecord
from samsa.client.share.acknowledgements import AcknowledgeType, Delivered, ack_batches
from samsa.client.share.records import acquired_records
from samsa.client.share.sessions import (
    PartitionAnswer,
    SendShareAcknowledge,
    SendShareFetch,
    ShareSessions,
)
from samsa.client.subscription import SubscriptionState
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.records import encode_batch
from tests.client.fakeclock import FakeClock, FakeMetadata, FakeNet

A = AcknowledgeType
E = ErrorCode
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
LEADERS = {T0: 1, T1: 1, T2: 2}


def leader(tp: TopicPartition) -> int | None:
    return LEADERS.get(tp)


# ---- acknowledgement modes ---------------------------------------------------------------

def test_ack_batches_are_runs_of_one_type() -> None:
    acks = {5: A.ACCEPT, 6: A.ACCEPT, 7: A.RELEASE, 9: A.RELEASE, 10: A.GAP}
    assert ack_batches(acks) == [(5, 6, (1,)), (7, 7, (2,)), (9, 9, (2,)), (10, 10, (0,))]
    assert ack_batches({}) == []


def test_implicit_mode_accepts_the_last_poll_and_refuses_acknowledge() -> None:
    d = Delivered("implicit")
    d.deliver([(T0, 3), (T0, 4), (T1, 0)])
    with pytest.raises(IllegalStateError):
        d.acknowledge(T0, 3, A.RELEASE)
    assert d.for_poll() == {T0: {3: A.ACCEPT, 4: A.ACCEPT}, T1: {0: A.ACCEPT}}
    assert d.for_poll() == {}  # taken once


def test_explicit_mode_refuses_a_poll_with_unacknowledged_records() -> None:
    d = Delivered("explicit")
    d.deliver([(T0, 3), (T0, 4)])
    d.acknowledge(T0, 3, A.REJECT)
    with pytest.raises(IllegalStateError, match="must be acknowledged"):
        d.for_poll()
    with pytest.raises(IllegalStateError):
        d.acknowledge(T0, 99, A.ACCEPT)  # not delivered
    d.acknowledge(T0, 4, A.RENEW)
    with pytest.raises(IllegalStateError):
        d.for_poll()  # a renewed record still needs its final acknowledgement
    assert d.take() == {T0: {3: A.REJECT, 4: A.RENEW}}  # a commit sends both
    with pytest.raises(IllegalStateError):
        d.acknowledge(T0, 3, A.ACCEPT)  # sent already
    d.acknowledge(T0, 4, A.ACCEPT)
    assert d.for_poll() == {T0: {4: A.ACCEPT}}
    with pytest.raises(ValueError):
        Delivered("auto")


def test_deserializers_apply_to_share_records() -> None:
    r = ConsumerRecord("t", 0, 5, 0, 0, b"k", None, [], 2)
    assert deserialize([r], bytes.decode, None) == [r._replace(key="k")]
    assert deserialize([r], None, None)[0] is r


def test_acquired_records_keep_the_acquired_offsets_and_acknowledge_gaps() -> None:
    """A batch holds offsets 10-13 and 16 after a compaction gap; the member acquired
    11-12 (delivery 1) and 16-17 (delivery 3): 10 and 13 are not its, 17 has no record."""
    data = encode_batch([(1, b"k", b"v%d" % i, []) for i in range(4)], base_offset=10) + \
        encode_batch([(1, None, b"v6", [])], base_offset=16)
    records, gaps = acquired_records(T0, data, [(16, 17, 3), (11, 12, 1)])
    assert [(r.offset, r.value, r.delivery_count) for r in records] == [
        (11, b"v1", 1), (12, b"v2", 1), (16, b"v6", 3)]
    assert gaps == [17]
    assert acquired_records(T0, data, []) == ([], [])


# ---- share sessions ----------------------------------------------------------------------

def ok(req: Any, *parts: PartitionAnswer) -> list[PartitionAnswer]:
    return list(parts) or [PartitionAnswer(tp, 0) for tp in
                           (req.partitions if isinstance(req, SendShareFetch) else req.acks)]


def test_session_epochs_and_piggybacked_acknowledgements() -> None:
    s = ShareSessions()
    first = s.step(0, leader, {T0, T1, T2}, set())
    assert [(r.node, r.epoch, r.partitions) for r in first] == [
        (1, 0, frozenset({T0, T1})), (2, 0, frozenset({T2}))]
    assert s.step(0, leader, {T0, T1, T2}, set()) == []  # one request in flight per broker
    s.acknowledge({T0: {0: A.ACCEPT, 1: A.RELEASE}})
    for r in first:
        s.on_answer(r, 0, 0, ok(r))
    second = s.step(0, leader, {T0, T1, T2}, {2})  # broker 2's records are still buffered
    assert len(second) == 1
    (fetch,) = second
    assert isinstance(fetch, SendShareFetch) and (fetch.node, fetch.epoch) == (1, 1)
    # the session knows T1: only the partition with acknowledgements is named
    assert fetch.partitions == {T0} and fetch.acks == {T0: {0: A.ACCEPT, 1: A.RELEASE}}
    s.on_answer(fetch, 0, 0, [PartitionAnswer(T0, 0, 0)])
    assert s.results[-1].offsets == {0, 1} and s.results[-1].error == 0
    assert [r.epoch for r in s.step(0, leader, {T0, T1, T2}, set())] == [2, 1]


def test_no_acknowledgement_in_an_opening_request() -> None:
    s = ShareSessions()
    s.acknowledge({T0: {4: A.ACCEPT}})
    (opening,) = s.step(0, leader, {T0}, set())
    assert opening.epoch == 0 and opening.acks == {}
    s.on_answer(opening, 0, 0, ok(opening))
    (next_one,) = s.step(0, leader, {T0}, set())
    assert next_one.acks == {T0: {4: A.ACCEPT}} and next_one.epoch == 1


def test_commit_sends_a_share_acknowledge_and_collects_errors() -> None:
    s = ShareSessions()
    (opening,) = s.step(0, leader, {T0, T1}, set())
    s.on_answer(opening, 0, 0, ok(opening))
    s.acknowledge({T1: {7: A.ACCEPT}})  # piggyback-only: travels with the commit
    cid = s.acknowledge({T0: {1: A.ACCEPT, 2: A.ACCEPT}}, commit=True)
    assert cid is not None and s.commit_result(cid) is None
    (ack,) = s.step(0, leader, {T0, T1}, {1})
    assert isinstance(ack, SendShareAcknowledge) and ack.epoch == 1
    assert ack.acks == {T0: {1: A.ACCEPT, 2: A.ACCEPT}, T1: {7: A.ACCEPT}}
    s.on_answer(ack, 0, 0, [PartitionAnswer(T0, int(E.invalid_record_state)),
                         PartitionAnswer(T1, 0)])
    assert s.commit_result(cid) == {T0: E.invalid_record_state}
    assert {(r.tp, r.error) for r in s.results} == {(T0, E.invalid_record_state), (T1, 0)}
    assert s.acknowledge({}, commit=True) is not None


@pytest.mark.parametrize("error", [E.invalid_share_session_epoch, E.share_session_not_found])
def test_a_session_error_restarts_the_session_and_fails_its_acknowledgements(
        error: ErrorCode) -> None:
    s = ShareSessions()
    (opening,) = s.step(0, leader, {T0}, set())
    s.on_answer(opening, 0, 0, ok(opening))
    cid = s.acknowledge({T0: {3: A.RELEASE}}, commit=True)
    (ack,) = s.step(0, leader, {T0}, set())
    s.on_answer(ack, 0, int(error), [])
    assert cid is not None and s.commit_result(cid) == {T0: error}
    assert s.error is None  # not raised: the session starts again
    (again,) = s.step(100, leader, {T0}, set())  # after retry_backoff_ms
    assert again.epoch == 0 and isinstance(again, SendShareFetch) and again.partitions == {T0}


def test_no_answer_restarts_the_session_after_a_backoff() -> None:
    s = ShareSessions(retry_backoff_ms=100)
    (opening,) = s.step(0, leader, {T0}, set())
    s.on_failed(opening, 1000)
    assert s.metadata_stale
    assert s.step(1099, leader, {T0}, set()) == []
    (again,) = s.step(1100, leader, {T0}, set())
    assert again.epoch == 0
    s.on_answer(again, 1200, int(E.group_authorization_failed), [])
    assert s.error == E.group_authorization_failed
    assert s.step(1250, leader, {T0}, set()) == []  # errors back off too
    (third,) = s.step(1300, leader, {T0}, set())
    s.on_answer(third, 1300, 0, [PartitionAnswer(T0, int(E.unknown_topic_id))])
    assert s.step(1350, leader, {T0}, set()) == [] and len(s.step(1400, leader, {T0}, set())) == 1


def test_moved_partitions_are_forgotten_and_a_leader_change_refreshes_metadata() -> None:
    s = ShareSessions()
    (opening,) = s.step(0, leader, {T0, T1}, set())
    s.on_answer(opening, 0, 0, [PartitionAnswer(T0, 0),
                             PartitionAnswer(T1, int(E.not_leader_or_follower))])
    assert s.metadata_stale
    (fetch,) = s.step(100, leader, {T0}, set())  # T1 is no longer assigned here
    assert isinstance(fetch, SendShareFetch) and fetch.forgotten == {T1}
    assert fetch.partitions == frozenset()
    assert s.step(0, lambda tp: None, {T2}, set()) == [] and s.metadata_stale


def test_acknowledgements_of_a_revoked_partition_go_in_a_share_acknowledge() -> None:
    s = ShareSessions()
    (opening,) = s.step(0, leader, {T0}, set())
    s.on_answer(opening, 0, 0, ok(opening))
    s.acknowledge({T0: {0: A.ACCEPT}})
    (ack,) = s.step(0, leader, set(), set())
    assert isinstance(ack, SendShareAcknowledge) and ack.acks == {T0: {0: A.ACCEPT}}


def test_close_acknowledges_with_epoch_minus_one() -> None:
    s = ShareSessions()
    first = s.step(0, leader, {T0, T2}, set())
    s.on_answer(first[0], 0, 0, ok(first[0]))  # broker 2's opening fetch stays in flight
    s.acknowledge({T0: {5: A.ACCEPT}}, commit=True)
    closing = s.close(leader)
    assert [(r.node, r.epoch, dict(r.acks)) for r in closing] == [(1, -1, {T0: {5: A.ACCEPT}})]
    s.on_answer(closing[0], 0, 0, [PartitionAnswer(T0, 0)])
    assert 1 not in s.sessions and s.in_flight()  # broker 2 still answers its fetch


def test_renew_marks_the_request() -> None:
    s = ShareSessions()
    (opening,) = s.step(0, leader, {T0}, set())
    s.on_answer(opening, 0, 0, ok(opening))
    s.acknowledge({T0: {1: A.RENEW}}, commit=True)
    (renew,) = s.step(0, leader, {T0}, set())
    assert isinstance(renew, SendShareAcknowledge) and renew.renew


# ---- membership: the ShareGroupHeartbeat driver -----------------------------------------

TID = UUID(int=7)


class IdMetadata(FakeMetadata):
    def __init__(self, net: FakeNet) -> None:
        super().__init__(net)
        self.cluster = SimpleNamespace(topic_names={TID: "t"})  # type: ignore[assignment]


def beat(code: int = 0, epoch: int = 1, parts: list[int] | None = None,
         interval: int = 500) -> Any:
    assignment = None if parts is None else SimpleNamespace(
        topic_partitions=[SimpleNamespace(topic_id=TID, partitions=parts)])
    return SimpleNamespace(error_code=code, error_message=None, member_id=None,
                           member_epoch=epoch, heartbeat_interval=interval,
                           assignment=assignment)


def test_share_membership_joins_heartbeats_at_the_interval_rejoins_and_leaves() -> None:
    clock, net = FakeClock(), FakeNet()
    net.responders[ApiKey.FIND_COORDINATOR] = lambda body: SimpleNamespace(
        coordinators=[SimpleNamespace(key="g", error_code=0, node_id=3, host="h", port=9)])
    answers: list[Any] = []
    net.responders[ApiKey.SHARE_GROUP_HEARTBEAT] = lambda body: answers.pop(0)
    subs = SubscriptionState("latest")
    subs.subscribe(["t"], None, None)
    driver = ShareGroupDriver(IdMetadata(net), subs, group_id="g",  # type: ignore[arg-type]
                              max_poll_interval_ms=60_000, rack="r", retry_backoff_ms=100,
                              client_id="c", wakeup_flag=lambda: False, clock=clock,
                              member_id="m-1")
    driver.request_rejoin("subscribed")
    driver.member.machine.poll(clock.now() * 1000)
    driver.heartbeat.run_once()  # FindCoordinator
    answers.append(beat(epoch=1, parts=[0, 1]))
    driver.heartbeat.run_once()

    def sent() -> list[Any]:
        return [s.body for s in net.sent if s.api_key == ApiKey.SHARE_GROUP_HEARTBEAT]

    assert sent()[-1] == {"group_id": "g", "member_id": "m-1", "member_epoch": 0,
                          "rack_id": "r", "subscribed_topic_names": ["t"]}
    driver.user_steps()  # reconcile: the assignment is shared, nothing is committed
    assert subs.assignment.keys() == {T0, T1}
    answers.append(beat(epoch=1, parts=[0, 1]))
    driver.heartbeat.run_once()  # the acknowledgement, at once
    assert sent()[-1] == {"group_id": "g", "member_id": "m-1", "member_epoch": 1,
                          "rack_id": None, "subscribed_topic_names": None}
    assert driver.state == "STABLE"
    count = len(sent())
    clock.advance(0.4)
    driver.heartbeat.run_once()
    assert len(sent()) == count  # the broker's interval (500 ms) has not passed
    clock.advance(0.2)
    answers.append(beat(code=int(E.fenced_member_epoch), epoch=0))
    driver.heartbeat.run_once()
    assert driver.state == "FENCED"
    driver.user_steps()  # partitions lost, then joining again at epoch 0
    assert subs.assignment == {}
    answers.append(beat(epoch=3, parts=[1]))
    driver.heartbeat.run_once()
    assert sent()[-1]["member_epoch"] == 0 and sent()[-1]["subscribed_topic_names"] == ["t"]
    driver.user_steps()
    assert subs.assignment.keys() == {T1} and driver.generation == 3
    answers.append(beat(epoch=-1))
    driver.unsubscribe()
    assert sent()[-1] == {"group_id": "g", "member_id": "m-1", "member_epoch": -1,
                          "rack_id": None, "subscribed_topic_names": None}
    assert driver.state == "UNSUBSCRIBED"
