"""ShareFetch and ShareAcknowledge over TCP with raw requests, every served version: share
session epochs and their errors, acquisition by one member at a time, acknowledgements by
the holder only, RELEASE redelivering with a higher delivery count, renew-only requests,
bad acknowledge types, a parked fetch whose connection closes, KIP-1206's acquire modes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from samsa.broker.handlers import share_acknowledge, share_fetch
from samsa.protocol.api_keys import ApiKey
from tests.broker.test_admin_api_versions import create
from tests.broker.test_group_api_versions import call, unique, versions
from tests.brokerproc import BrokerProcess
from tests.conformance.groupkit import produce
from tests.conformance.sharekit import set_group_configs
from tests.wire import WireClient

E = ErrorCode


@pytest.fixture(scope="module")
def wire(share_broker: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(share_broker.bootstrap)
    yield c
    c.close()


def _topic(broker: BrokerProcess, c: WireClient, records: int) -> tuple[str, uuid.UUID, str]:
    name, group = unique("sw"), unique("swg")
    made = create(c, 7, {"name": name, "num_partitions": 1})
    assert made.topics[0].error_code == E.none
    set_group_configs(broker.bootstrap, group, {"share.auto.offset.reset": "earliest"})
    if records:
        produce(broker.bootstrap, name, 1, records)
    return name, made.topics[0].topic_id, group


def fetch(c: WireClient, version: int, group: str, member: str, epoch: int,
          topic_id: uuid.UUID | None = None, acks: list[tuple[int, int, list[int]]] | None = None,
          max_wait: int = 0, **extra: Any) -> Any:
    topics = [] if topic_id is None else [{"topic_id": topic_id, "partitions": [{
        "partition_index": 0, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": types}
            for f, last, types in acks or []]}]}]
    fields = dict(group_id=group, member_id=member, share_session_epoch=epoch,
                  max_wait=max_wait, min_bytes=1, max_bytes=1 << 20, max_records=100,
                  batch_size=100, topics=topics, forgotten_topics_data=[])
    return call(c, ApiKey.SHARE_FETCH, version, **{**fields, **extra})


def ack(c: WireClient, version: int, group: str, member: str, epoch: int,
        topic_id: uuid.UUID, acks: list[tuple[int, int, list[int]]]) -> Any:
    return call(c, ApiKey.SHARE_ACKNOWLEDGE, version, group_id=group, member_id=member,
                share_session_epoch=epoch, topics=[{"topic_id": topic_id, "partitions": [{
                    "partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": f, "last_offset": last, "acknowledge_types": types}
                        for f, last, types in acks]}]}])


def acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for t in resp.responses
            for p in t.partitions for a in p.acquired_records]


def part_errors(resp: Any) -> list[tuple[int, int]]:
    """(error, acknowledge error) per partition (ShareAcknowledge has only the first)."""
    return [(p.error_code, getattr(p, "acknowledge_error_code", 0)) for t in resp.responses
            for p in t.partitions]


@pytest.mark.parametrize("version", versions(share_fetch))
def test_share_session_epochs(share_broker: BrokerProcess, wire: WireClient,
                              version: int) -> None:
    _, topic_id, group = _topic(share_broker, wire, 0)
    assert fetch(wire, version, group, "m", 3).error_code == E.share_session_not_found
    assert fetch(wire, version, "", "m", 0).error_code == E.invalid_request
    assert fetch(wire, version, group, "m", 0, topic_id).error_code == E.none
    assert fetch(wire, version, group, "m", 1).error_code == E.none
    assert fetch(wire, version, group, "m", 1).error_code == E.invalid_share_session_epoch
    assert fetch(wire, version, group, "m", -1, topic_id).error_code == E.invalid_request
    assert fetch(wire, version, group, "m", -1).error_code == E.none  # closes it
    assert fetch(wire, version, group, "m", 2).error_code == E.share_session_not_found


@pytest.mark.parametrize("version", versions(share_acknowledge))
def test_acknowledge_needs_a_session_and_the_records(share_broker: BrokerProcess,
                                                     wire: WireClient, version: int) -> None:
    _, topic_id, group = _topic(share_broker, wire, 4)
    assert ack(wire, version, group, "a", 0, topic_id, [(0, 0, [1])]).error_code == \
        E.invalid_share_session_epoch
    first = fetch(wire, 2, group, "a", 0, topic_id)
    assert acquired(first) == [(0, 3, 1)]
    assert acquired(fetch(wire, 2, group, "b", 0, topic_id)) == []  # all held by a
    wrong = ack(wire, version, group, "b", 1, topic_id, [(0, 0, [1])])
    assert part_errors(wrong) == [(E.invalid_record_state, 0)]
    bad_type = ack(wire, version, group, "a", 1, topic_id, [(0, 0, [9])])
    assert part_errors(bad_type) == [(E.invalid_request, 0)]
    ok = ack(wire, version, group, "a", 2, topic_id, [(0, 1, [1]), (2, 3, [2])])
    assert (ok.error_code, part_errors(ok)) == (E.none, [(E.none, 0)])
    again = fetch(wire, 2, group, "b", 2)  # b's session: the released pair, count 2
    assert acquired(again) == [(2, 3, 2)]
    # piggybacked: b accepts them in its next fetch; nothing is left to acquire
    done = fetch(wire, 2, group, "b", 3, topic_id, acks=[(2, 3, [1])])
    assert part_errors(done) == [(E.none, E.none)] and acquired(done) == []


def test_renew_only_fetch_acquires_nothing(share_broker: BrokerProcess,
                                           wire: WireClient) -> None:
    _, topic_id, group = _topic(share_broker, wire, 3)
    assert acquired(fetch(wire, 2, group, "a", 0, topic_id, max_records=1,
                          share_acquire_mode=1)) == [(0, 0, 1)]
    renewed = fetch(wire, 2, group, "a", 1, topic_id, acks=[(0, 0, [4])], is_renew_ack=True)
    assert renewed.error_code == E.none and acquired(renewed) == []
    assert part_errors(renewed) == [(E.none, E.none)]


def test_a_member_leaving_the_group_gives_its_records_back(share_broker: BrokerProcess,
                                                           wire: WireClient) -> None:
    """ShareGroupHeartbeat with epoch -1 while the member's share session is still open: the
    records it holds come back at once (its group's lock would last a minute)."""
    name, topic_id, group = _topic(share_broker, wire, 2)
    set_group_configs(share_broker.bootstrap, group, {"share.record.lock.duration.ms": "60000"})

    def heartbeat(member: str, epoch: int) -> Any:
        return call(wire, ApiKey.SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member,
                    member_epoch=epoch, rack_id=None,
                    subscribed_topic_names=[name] if epoch == 0 else None)

    joined = heartbeat("m", 0)
    assert (joined.error_code, joined.member_epoch) == (E.none, 1)
    assert acquired(fetch(wire, 2, group, "m", 0, topic_id)) == [(0, 1, 1)]
    assert acquired(fetch(wire, 2, group, "n", 0, topic_id)) == []
    assert heartbeat("m", -1).member_epoch == -1
    assert acquired(fetch(wire, 2, group, "n", 1)) == [(0, 1, 2)]



def test_a_parked_fetch_of_a_closed_connection_acquires_nothing(
        share_broker: BrokerProcess, wire: WireClient) -> None:
    """A member holds records and has a ShareFetch parked (nothing more to acquire) when
    its connection closes (the client was killed): the session closes and releases the
    records, and the parked fetch, cancelled in the same step, does not acquire them again
    for the dead member (it did: asyncio's ``wait_for`` returned the wake-up instead of the
    cancellation, and the records stayed held by no one until the member timed out)."""
    import time

    from kio.index import load_request_schema

    from samsa.protocol.build import build
    from samsa.protocol.codec import encode_request

    _, topic_id, group = _topic(share_broker, wire, 3)
    gone = WireClient(share_broker.bootstrap)
    assert acquired(fetch(gone, 2, group, "gone", 0, topic_id)) == [(0, 2, 1)]
    body = build(load_request_schema(ApiKey.SHARE_FETCH, 2), dict(
        group_id=group, member_id="gone", share_session_epoch=1, max_wait=10_000,
        min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100, topics=[],
        forgotten_topics_data=[]))
    gone.send_raw(encode_request(ApiKey.SHARE_FETCH, 2, 99, "wire-test", body))
    time.sleep(0.5)  # parked: nothing more to acquire
    gone.close()
    deadline = time.monotonic() + 1.5  # well inside the lock (2 s)
    got: list[tuple[int, int, int]] = []
    epoch = 0
    while not got and time.monotonic() < deadline:
        got = acquired(fetch(wire, 2, group, "b", epoch, topic_id if epoch == 0 else None))
        epoch += 1
    assert got == [(0, 2, 2)]


def _one_batch(broker: BrokerProcess, c: WireClient,
               records: int) -> tuple[uuid.UUID, str, str]:
    """A topic holding one log batch of ``records``; two groups reading it from the start."""
    name, topic_id, group = _topic(broker, c, 0)
    one_batch = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
    for i in range(records):
        one_batch.produce(name, str(i).encode(), partition=0)
    assert one_batch.flush(15) == 0
    strict = unique("swg")
    set_group_configs(broker.bootstrap, strict, {"share.auto.offset.reset": "earliest"})
    return topic_id, group, strict


def test_batch_optimized_acquires_whole_batches_record_limit_does_not(
        share_broker: BrokerProcess, wire: WireClient) -> None:
    """KIP-1206: ``max_records`` is a soft limit for v1 and v2's BATCH_OPTIMIZED mode (the
    log batch that reaches it is acquired whole) and a hard one for RECORD_LIMIT."""
    topic_id, group, strict = _one_batch(share_broker, wire, 10)
    assert acquired(fetch(wire, 1, group, "a", 0, topic_id, max_records=3)) == [(0, 9, 1)]
    assert acquired(fetch(wire, 2, strict, "b", 0, topic_id, max_records=3,
                          share_acquire_mode=1)) == [(0, 2, 1)]
    assert acquired(fetch(wire, 2, strict, "c", 0, topic_id, max_records=3,
                          share_acquire_mode=0)) == [(3, 9, 1)]


def test_opening_a_session_again_keeps_the_members_records(share_broker: BrokerProcess,
                                                           wire: WireClient) -> None:
    """As Kafka 4.3's SharePartitionManager.newContext: a ShareFetch at epoch 0 replaces the
    member's share session without releasing what the member holds (its records stay
    acquired by the member id, which acknowledges them from the new session), and may carry
    no acknowledgements (INVALID_REQUEST, the session untouched)."""
    _, topic_id, group = _topic(share_broker, wire, 2)
    assert acquired(fetch(wire, 2, group, "a", 0, topic_id)) == [(0, 1, 1)]
    refused = fetch(wire, 2, group, "a", 0, topic_id, acks=[(0, 1, [1])])
    assert refused.error_code == E.invalid_request
    assert fetch(wire, 2, group, "a", 1).error_code == E.none  # the old session lives on
    assert fetch(wire, 2, group, "a", 0, topic_id).error_code == E.none  # replaced
    assert acquired(fetch(wire, 2, group, "b", 0, topic_id)) == []  # still a's
    done = ack(wire, 2, group, "a", 1, topic_id, [(0, 1, [1])])
    assert (done.error_code, part_errors(done)) == (E.none, [(E.none, 0)])


def test_group_configs_bound_record_locks_and_turn_renew_off(share_broker: BrokerProcess,
                                                             wire: WireClient) -> None:
    """Kafka's group configs ``share.partition.max.record.locks`` (the group's in-flight
    window: here 100 of 150 records) and ``share.renew.acknowledge.enable=false`` (a RENEW
    is INVALID_RECORD_STATE for its partition, nothing changed: the record is still the
    member's to accept)."""
    _, topic_id, group = _topic(share_broker, wire, 150)
    set_group_configs(share_broker.bootstrap, group, {
        "share.partition.max.record.locks": "100", "share.renew.acknowledge.enable": "false"})
    got = fetch(wire, 2, group, "a", 0, topic_id, max_records=500, share_acquire_mode=1)
    assert acquired(got) == [(0, 99, 1)]
    renew = ack(wire, 2, group, "a", 1, topic_id, [(0, 0, [4])])
    assert part_errors(renew) == [(E.invalid_record_state, 0)]
    done = ack(wire, 2, group, "a", 2, topic_id, [(0, 99, [1])])
    assert part_errors(done) == [(E.none, 0)]
    assert acquired(fetch(wire, 2, group, "a", 3, max_records=500,
                          share_acquire_mode=1)) == [(100, 149, 1)]


def test_a_group_config_change_applies_to_a_share_partition_in_use(
        share_broker: BrokerProcess, wire: WireClient) -> None:
    """``share.partition.max.record.locks`` lowered while the share partition is in use:
    its next fetch acquires within the new window (as Kafka reads group configs at use)."""
    _, topic_id, group = _topic(share_broker, wire, 300)
    got = fetch(wire, 2, group, "a", 0, topic_id, max_records=100, share_acquire_mode=1)
    assert acquired(got) == [(0, 99, 1)]
    set_group_configs(share_broker.bootstrap, group, {"share.partition.max.record.locks": "150"})
    assert acquired(fetch(wire, 2, group, "a", 1, max_records=500,
                          share_acquire_mode=1)) == [(100, 149, 1)]


def test_batch_optimized_acquires_the_batch_the_window_cuts(
        share_broker: BrokerProcess, wire: WireClient) -> None:
    """As Kafka: the window (``group.share.partition.max.record.locks``, 2000) bounds how
    many records a fetch asks for, and batch-optimized mode rounds that up to the end of the
    log batch, so a batch of 2,500 is acquired whole (record-limit mode stops at 2,000)."""
    topic_id, group, strict = _one_batch(share_broker, wire, 2_500)
    assert acquired(fetch(wire, 2, group, "a", 0, topic_id, max_records=5_000,
                          batch_size=5_000)) == [(0, 2_499, 1)]
    assert acquired(fetch(wire, 2, strict, "b", 0, topic_id, max_records=5_000,
                          batch_size=5_000, share_acquire_mode=1)) == [(0, 1_999, 1)]
