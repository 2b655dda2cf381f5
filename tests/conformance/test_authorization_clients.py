"""Real clients against a broker with Kafka's authorizer (allow.everyone.if.no.acl.found
false): confluent-kafka, kafka-python and the Java client 4.3 produce to a topic they may
WRITE and consume in a group they may READ; a producer without WRITE gets
TOPIC_AUTHORIZATION_FAILED, a consumer without GROUP READ gets GROUP_AUTHORIZATION_FAILED,
and the broker keeps serving the others. The Java Admin creates, lists and deletes ACLs.

Every client is ``User:ANONYMOUS`` from 127.0.0.1 until authentication lands (see
:mod:`tests.security.kit`); the ACLs name it, or everyone (``User:*``). With principals, these
tests only need the clients' security settings and their principal in the ACLs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import errors as kp_errors

from samsa.security.acl import CLUSTER_NAME, AclBinding, PatternType
from tests.brokerproc import BrokerProcess
from tests.conformance.javakit import Driver, JavaKit
from tests.security.kit import (
    ADMIN_HOST,
    ALLOW,
    SUBJECT,
    SUBJECT_HOST,
    C,
    G,
    Op,
    T,
    create_topic,
    produce,
    secured_broker,
    unique,
)
from tests.wire import WireClient

pytestmark = pytest.mark.conformance
logging.getLogger("kafka").setLevel(logging.CRITICAL)  # kafka-python logs every refusal

PREFIX = unique("authz")
WRITABLE, READ_ONLY = f"{PREFIX}-writable", f"{PREFIX}-readonly"
GROUPS = f"{PREFIX}-allowed-"
"""Groups starting so may be READ (a PREFIXED ACL); no other group may."""
RECORDS = 3


def acls() -> list[AclBinding]:
    """What the clients may do (besides nothing)."""
    def acl(rtype: Any, name: str, op: Op, principal: str = SUBJECT,
            pattern: PatternType = PatternType.LITERAL) -> AclBinding:
        return AclBinding(rtype, name, pattern, principal, SUBJECT_HOST, op, ALLOW)

    return [acl(T, WRITABLE, Op.WRITE, "User:*"), acl(T, WRITABLE, Op.READ, "User:*"),
            acl(T, READ_ONLY, Op.READ), acl(G, GROUPS, Op.READ, pattern=PatternType.PREFIXED),
            acl(C, CLUSTER_NAME, Op.ALTER), acl(C, CLUSTER_NAME, Op.DESCRIBE)]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = secured_broker(tmp_path_factory.mktemp("authz-clients") / "data", acls()).start()
    admin = WireClient(proc.bootstrap, source=ADMIN_HOST)
    for topic in (WRITABLE, READ_ONLY):
        create_topic(admin, topic)
        assert produce(admin, topic).responses[0].partition_responses[0].error_code == 0
    admin.close()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


# ---- confluent-kafka (librdkafka) -------------------------------------------------------


def rd_consume(bootstrap: str, group: str, topic: str) -> tuple[int, int | None]:
    """(records consumed, the first error code) of a librdkafka consumer in ``group``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    c.subscribe([topic])
    got, error = 0, None
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and got < 1 and error is None:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                error = msg.error().code()
            else:
                got += 1
    finally:
        c.close()
    return got, error


def rd_produce(bootstrap: str, topic: str) -> int:
    """The delivery error code of one record (0: delivered)."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    codes: list[int] = []
    p.produce(topic, b"value", on_delivery=lambda err, msg: codes.append(
        err.code() if err else 0))
    p.flush(15)
    assert len(codes) == 1
    return codes[0]


def test_confluent_kafka(secured: BrokerProcess) -> None:
    b = secured.bootstrap
    assert rd_produce(b, READ_ONLY) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert rd_consume(b, f"{PREFIX}-denied-rd", WRITABLE) == (
        0, KafkaError.GROUP_AUTHORIZATION_FAILED)
    # the broker keeps serving: what is allowed still works
    assert rd_produce(b, WRITABLE) == 0
    assert rd_consume(b, f"{GROUPS}rd", WRITABLE) == (1, None)


# ---- kafka-python -------------------------------------------------------------------------


def test_kafka_python(secured: BrokerProcess) -> None:
    b = secured.bootstrap
    producer = KafkaProducer(bootstrap_servers=b, retries=0, max_block_ms=10000)
    try:
        with pytest.raises(kp_errors.TopicAuthorizationFailedError):
            producer.send(READ_ONLY, b"value").get(timeout=15)
        assert producer.send(WRITABLE, b"value").get(timeout=15).offset >= 0
    finally:
        producer.close()

    def consume(group: str) -> int:
        consumer = KafkaConsumer(WRITABLE, bootstrap_servers=b, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=300)
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                got = consumer.poll(timeout_ms=200)
                if got:
                    return sum(len(v) for v in got.values())
            return 0
        finally:
            consumer.close()

    with pytest.raises(kp_errors.GroupAuthorizationFailedError):
        consume(f"{PREFIX}-denied-kp")
    assert consume(f"{GROUPS}kp") > 0


# ---- Apache Kafka's Java client ----------------------------------------------------------


def events_until_exit(d: Driver) -> list[dict[str, Any]]:
    d.wait_exit(60)
    return d.events


def member_outcome(java: JavaKit, bootstrap: str, group: str, main: str) -> dict[str, Any]:
    """The first records or error event of a Java consumer in ``group``."""
    d = java.start(main, bootstrap, group, WRITABLE, "session.timeout.ms=6000"
                   if main == "Member" else "client.id=cg", "driver.records=false")
    try:
        return d.wait_for(lambda e: e.get("event") in ("records", "error"), timeout=60)
    finally:
        d.kill()


def test_java_clients(secured: BrokerProcess, java: JavaKit) -> None:
    b = secured.bootstrap
    produced = java.start("Produce", b, "2", f"{WRITABLE}:none:1", f"{READ_ONLY}:none:1")
    events = events_until_exit(produced)
    assert [e["topic"] for e in events if e.get("event") == "sent"] == [WRITABLE] * 2
    (error,) = [e["error"] for e in events if e.get("event") == "error"]
    assert error.startswith("TopicAuthorizationException"), error
    for main in ("Member", "ConsumerProtocolMember"):  # classic and KIP-848 groups
        denied = member_outcome(java, b, f"{PREFIX}-denied-{main}", main)
        assert denied["event"] == "error", denied
        assert denied["error"].startswith("GroupAuthorizationException"), denied
        allowed = member_outcome(java, b, f"{GROUPS}{main}", main)
        assert allowed["event"] == "records", allowed


def test_java_admin_manages_acls(secured: BrokerProcess, java: JavaKit) -> None:
    admin = java.start("AdminDriver", secured.bootstrap)
    try:
        topic = unique("java-acl")
        acl = f"topic,prefixed,{topic},User:alice,10.0.0.0/8,read,allow"
        bad = "cluster,literal,my-cluster,User:alice,*,alter,allow"
        created = admin.request(f"create-acls {acl} {bad}")
        assert created["ok"], created
        assert created["errors"][acl] is None
        assert created["errors"][bad].startswith("InvalidRequestException"), created
        match = f"topic,match,{topic}-orders,User:alice,null,any,any"
        listed = admin.request(f"describe-acls {match}")
        assert listed["acls"] == [
            f"TOPIC,PREFIXED,{topic},User:alice,10.0.0.0/8,READ,ALLOW"], listed
        deleted = admin.request(f"delete-acls topic,any,{topic},User:alice,null,any,any")
        assert deleted["results"][f"topic,any,{topic},User:alice,null,any,any"] == {
            "deleted": [f"TOPIC,PREFIXED,{topic},User:alice,10.0.0.0/8,READ,ALLOW"]}
        assert admin.request(f"describe-acls {match}")["acls"] == []
        everything = admin.request("describe-acls")["acls"]
        assert f"GROUP,PREFIXED,{GROUPS},{SUBJECT},{SUBJECT_HOST},READ,ALLOW" in everything
    finally:
        admin.kill()

