"""Real clients against the secure broker (TLS, SASL and Kafka's authorizer): confluent-kafka
(librdkafka), kafka-python, aiokafka, kcat and samsa's own client (the Java client is in
test_java_clients.py).

For each client and each way in (SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; SSL
with a client certificate; OAUTHBEARER for librdkafka and samsa's client):

* alice (WRITE and READ on topics ``app-*``, READ on groups ``app-*``) produces to a topic
  she creates, and consumes it in her group;
* bob (READ on those topics, nothing else) is refused as Kafka refuses him: his producer gets
  TOPIC_AUTHORIZATION_FAILED, his consumer GROUP_AUTHORIZATION_FAILED;
* the broker keeps serving the others: alice consumes after bob's refusals;
* a wrong password (for mTLS: a certificate of another CA; for OAUTHBEARER: a token signed
  by another key) is refused, and a plaintext client on a TLS listener is refused.

And KAFKA-18813 with librdkafka's KIP-848 consumer: a regex subscription is assigned only the
topics the member may DESCRIBE.

kcat only with PLAIN and mTLS: Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final
message repeats the client nonce; Kafka 4 (RFC 5802's nonce equality) refuses it, and so does
samsa. Newer librdkafka (confluent-kafka here) authenticates with SCRAM.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from samsa.protocol.api_keys import ApiKey
from tests.security.conftest import Secure
from tests.security.kit import APP, app_name, call, create_topic, password, produce
from tests.wire import WireClient

pytestmark = pytest.mark.conformance

SASL = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
N = 10
VALUES = [f"v{i}".encode() for i in range(N)]
WRONG = "not-the-password"


def _pw(user: str, wrong: bool) -> str:
    return WRONG if wrong else password(f"User:{user}")


def serving(secure: Secure) -> None:
    """alice still gets answers (after another client was refused)."""
    c = secure.connect(APP)
    try:
        meta = call(c, ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        assert meta.brokers
    finally:
        c.close()


@pytest.fixture(scope="module")
def forger() -> Any:
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


# -- librdkafka (confluent-kafka) -----------------------------------------------------------

def rdkafka(secure: Secure, way: str, user: str = "alice", wrong: bool = False,
            forger: Any = None) -> dict[str, Any]:
    ca = {"ssl.ca.location": str(secure.ca)}
    if way == "mTLS":
        cert = secure.stranger if wrong else secure.certs[user]
        return {"bootstrap.servers": secure.address("SSL"), "security.protocol": "SSL", **ca,
                "ssl.certificate.location": str(cert.crt), "ssl.key.location": str(cert.key)}
    if way == "OAUTHBEARER":
        key = forger if wrong else None
        return {"bootstrap.servers": secure.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER", **ca,
                "oauth_cb": lambda _config: (secure.token(user, key=key), time.time() + 600)}
    return {"bootstrap.servers": secure.address("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": way, "sasl.username": user, "sasl.password": _pw(user, wrong),
            **ca}


def rd_produce(conf: dict[str, Any], topic: str, n: int = N) -> list[int]:
    """The delivery error code of each record (0: delivered)."""
    p = Producer({**conf, "log_level": 3, "message.timeout.ms": 10000})
    codes: list[int] = []
    for i in range(n):
        p.produce(topic, f"v{i}".encode(),
                  on_delivery=lambda err, _msg: codes.append(err.code() if err else 0))
    assert p.flush(20) == 0
    return codes


def rd_consume(conf: dict[str, Any], topic: str, group: str,
               n: int = N) -> tuple[list[bytes], int | None]:
    """(values consumed, the first error code) of a consumer in ``group``; commits."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, "log_level": 3})
    c.subscribe([topic])
    got: list[bytes] = []
    error = None
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and error is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                error = m.error().code()
            else:
                got.append(m.value())
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got, error


def rdkafka_round_trip(conf: dict[str, Any], n: int = N) -> list[bytes]:
    """Produce ``n`` records to a new topic and consume them in a new group."""
    topic = app_name("rk")
    assert rd_produce(conf, topic, n) == [0] * n
    got, error = rd_consume(conf, topic, app_name("g"), n)
    assert error is None
    return got


@pytest.mark.parametrize("way", [*SASL, "mTLS", "OAUTHBEARER"])
def test_confluent_kafka_serves_alice_and_refuses_bob(secure: Secure, way: str) -> None:
    topic = app_name("rk")
    assert rd_produce(rdkafka(secure, way), topic) == [0] * N  # created by alice's CREATE
    bob = rdkafka(secure, way, "bob")
    assert rd_produce(bob, topic, 1) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert rd_consume(bob, topic, app_name("g")) == ([], KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert rd_consume(rdkafka(secure, way), topic, app_name("g")) == (VALUES, None)


def _rdkafka_errors(conf: dict[str, Any], timeout: float = 10.0) -> list[KafkaError]:
    """The errors a client that cannot get in reports (it gets no metadata)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        admin.poll(0.1)
    return errors


@pytest.mark.parametrize("way", [*SASL, "mTLS", "OAUTHBEARER"])
def test_confluent_kafka_wrong_credentials_are_refused(secure: Secure, way: str,
                                                       forger: Any) -> None:
    errors = {e.code() for e in _rdkafka_errors(rdkafka(secure, way, wrong=True,
                                                        forger=forger))}
    # a refused certificate ends the TLS handshake: the broker is unreachable
    assert (KafkaError._ALL_BROKERS_DOWN if way == "mTLS" else KafkaError._AUTHENTICATION) \
        in errors, errors
    serving(secure)


def test_confluent_kafka_without_a_client_certificate_is_refused(secure: Secure) -> None:
    conf = rdkafka(secure, "mTLS")
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    errors = {e.code() for e in _rdkafka_errors(conf)}
    assert KafkaError._ALL_BROKERS_DOWN in errors, errors  # ssl.client.auth=required


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_confluent_kafka_plaintext_client_on_a_tls_listener_is_refused(
        secure: Secure, listener: str) -> None:
    errors = {e.code() for e in _rdkafka_errors({"bootstrap.servers": secure.address(listener)})}
    assert KafkaError._ALL_BROKERS_DOWN in errors, errors
    serving(secure)


# -- kafka-python ---------------------------------------------------------------------------

def kafka_python(secure: Secure, way: str, user: str = "alice",
                 wrong: bool = False) -> dict[str, Any]:
    if way == "mTLS":
        cert = secure.stranger if wrong else secure.certs[user]
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_cafile": str(secure.ca), "ssl_certfile": str(cert.crt),
                "ssl_keyfile": str(cert.key)}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": user,
            "sasl_plain_password": _pw(user, wrong), "ssl_cafile": str(secure.ca)}


def _kp_produce(conf: dict[str, Any], topic: str, n: int = N) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(**conf, retries=0, max_block_ms=10000)
    try:
        for i in range(n):
            producer.send(topic, f"v{i}".encode()).get(timeout=15)
    finally:
        producer.close()


def _kp_consume(conf: dict[str, Any], topic: str, group: str) -> list[bytes]:
    from kafka import KafkaConsumer

    # kafka-python 3.0.12 may join before it knows the topic's partitions and rejoin when
    # they arrive; now and then it then stalls, out of its group though still fetching, and
    # refuses commits (a client bug, the broker sees no request): so its partitions are
    # asked first, its heartbeat is its default (300 ms makes the stall likelier), and it
    # does not commit here (the other clients do)
    consumer = KafkaConsumer(group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, **conf)
    got: list[bytes] = []
    try:
        consumer.partitions_for_topic(topic)
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    return got


@pytest.fixture
def quiet_kafka_python() -> Iterator[None]:
    """kafka-python logs every refusal at ERROR."""
    import logging

    logger = logging.getLogger("kafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("quiet_kafka_python")
@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_kafka_python_serves_alice_and_refuses_bob(secure: Secure, way: str) -> None:
    from kafka import errors

    topic = app_name("kp")
    _kp_produce(kafka_python(secure, way), topic)
    bob = kafka_python(secure, way, "bob")
    with pytest.raises(errors.TopicAuthorizationFailedError):
        _kp_produce(bob, topic, 1)
    with pytest.raises(errors.GroupAuthorizationFailedError):
        _kp_consume(bob, topic, app_name("g"))
    assert _kp_consume(kafka_python(secure, way), topic, app_name("g")) == VALUES


def _kp_refused(conf: dict[str, Any]) -> None:
    """kafka-python reports a connection it cannot make as a metadata timeout."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    producer = KafkaProducer(**conf, api_version=(3, 0), max_block_ms=2000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(app_name("t"), b"x").get(5)
    finally:
        producer.close(0)


@pytest.mark.usefixtures("quiet_kafka_python")
@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_kafka_python_wrong_credentials_are_refused(secure: Secure, way: str) -> None:
    """kafka-python only times out; for SASL the broker's log says why (a certificate of
    another CA fails the TLS handshake, which the broker does not log)."""
    said = "Invalid username or password" if way == "PLAIN" else f"mechanism {way}"
    before = secure.log.read_text().count(said)
    _kp_refused(kafka_python(secure, way, wrong=True))
    if way != "mTLS":
        assert secure.log.read_text().count(said) > before
    serving(secure)


@pytest.mark.usefixtures("quiet_kafka_python")
def test_kafka_python_plaintext_client_on_a_tls_listener_is_refused(secure: Secure) -> None:
    _kp_refused({"bootstrap_servers": secure.address("SASL_SSL")})
    serving(secure)


# -- aiokafka -------------------------------------------------------------------------------

def aiokafka(secure: Secure, way: str, user: str = "alice", wrong: bool = False
             ) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    if way == "mTLS":
        cert = secure.stranger if wrong else secure.certs[user]
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_context": create_ssl_context(cafile=str(secure.ca),
                                                  certfile=str(cert.crt),
                                                  keyfile=str(cert.key))}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": user,
            "sasl_plain_password": _pw(user, wrong),
            "ssl_context": create_ssl_context(cafile=str(secure.ca))}


async def _aio_produce(conf: dict[str, Any], topic: str, n: int = N) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**conf, request_timeout_ms=10000)
    try:
        await producer.start()
        for i in range(n):
            await producer.send_and_wait(topic, f"v{i}".encode())
    finally:
        await producer.stop()


async def _aio_consume(conf: dict[str, Any], topic: str, group: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, **conf)
    got: list[bytes] = []
    try:
        await consumer.start()  # bob's consumer is refused here: stop() it all the same
        async with asyncio.timeout(30):
            async for record in consumer:
                got.append(record.value)
                if len(got) == N:
                    break
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_aiokafka_serves_alice_and_refuses_bob(secure: Secure, way: str) -> None:
    from aiokafka import errors

    topic = app_name("aio")

    async def run() -> list[bytes]:
        await _aio_produce(aiokafka(secure, way), topic)
        bob = aiokafka(secure, way, "bob")
        with pytest.raises(errors.TopicAuthorizationFailedError):
            await _aio_produce(bob, topic, 1)
        with pytest.raises(errors.GroupAuthorizationFailedError):
            await _aio_consume(bob, topic, app_name("g"))
        return await _aio_consume(aiokafka(secure, way), topic, app_name("g"))

    assert asyncio.run(run()) == VALUES


def _aio_refused(conf: dict[str, Any]) -> None:
    """aiokafka's producer cannot start. aiokafka leaves the socket of a connection that
    failed its TLS handshake or SASL login open (even after ``stop()``): it is collected
    here, where the tests ignore the warning, rather than in whichever test runs next."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioError

    async def run() -> None:
        producer = AIOKafkaProducer(**conf, request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AioError):
        asyncio.run(run())
    gc.collect()


aiokafka_leaks = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning")


@aiokafka_leaks
@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_aiokafka_wrong_credentials_are_refused(secure: Secure, way: str) -> None:
    _aio_refused(aiokafka(secure, way, wrong=True))
    serving(secure)


@aiokafka_leaks
def test_aiokafka_plaintext_client_on_a_tls_listener_is_refused(secure: Secure) -> None:
    _aio_refused({"bootstrap_servers": secure.address("SSL")})
    serving(secure)


# -- kcat -----------------------------------------------------------------------------------

def _kcat(*args: str, stdin: str | None = None,
          check: bool = True) -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60,
                          check=check)


def _kcat_opts(secure: Secure, way: str, user: str = "alice", wrong: bool = False) -> list[str]:
    if way == "mTLS":
        cert = secure.stranger if wrong else secure.certs[user]
        return ["-b", secure.address("SSL"), "-X", "security.protocol=SSL",
                "-X", f"ssl.ca.location={secure.ca}",
                "-X", f"ssl.certificate.location={cert.crt}",
                "-X", f"ssl.key.location={cert.key}"]
    return ["-b", secure.address("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
            "-X", f"sasl.mechanisms={way}", "-X", f"sasl.username={user}",
            "-X", f"sasl.password={_pw(user, wrong)}", "-X", f"ssl.ca.location={secure.ca}"]


needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")


@needs_kcat
@pytest.mark.parametrize("way", ["PLAIN", "mTLS"])
def test_kcat_serves_alice_and_refuses_bob(secure: Secure, way: str) -> None:
    alice, bob = _kcat_opts(secure, way), _kcat_opts(secure, way, "bob")
    topic = app_name("kcat")
    _kcat(*alice, "-P", "-t", topic, stdin="".join(f"v{i}\n" for i in range(N)))
    refused = _kcat(*bob, "-P", "-t", topic, stdin="x\n", check=False)
    assert refused.returncode != 0 and "Topic authorization failed" in refused.stderr
    refused = _kcat(*bob, "-G", app_name("g"), "-c", "1", topic, check=False)
    assert refused.returncode != 0 and "Group authorization failed" in refused.stderr
    out = _kcat(*alice, "-G", app_name("g"), "-X", "auto.offset.reset=earliest", "-c", str(N),
                "-f", "%s\n", topic)
    assert out.stdout.split() == [v.decode() for v in VALUES]


@needs_kcat
@pytest.mark.parametrize("way", ["PLAIN", "mTLS"])
def test_kcat_wrong_credentials_are_refused(secure: Secure, way: str) -> None:
    done = _kcat(*_kcat_opts(secure, way, wrong=True), "-L", "-m", "3", check=False)
    assert done.returncode != 0
    assert ("Authentication failed" if way == "PLAIN" else "SSL routines") in done.stderr, \
        done.stderr
    serving(secure)


@needs_kcat
def test_kcat_plaintext_client_on_a_tls_listener_is_refused(secure: Secure) -> None:
    done = _kcat("-b", secure.address("SSL"), "-L", "-m", "3", check=False)
    assert done.returncode != 0 and "SSL listener?" in done.stderr, done.stderr
    serving(secure)


# -- samsa's own client ---------------------------------------------------------------------

def samsa_conf(secure: Secure, way: str, user: str = "alice", wrong: bool = False
               ) -> dict[str, Any]:
    if way == "mTLS":
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_cafile": str(secure.ca), "ssl_certfile": str(secure.certs[user].crt),
                "ssl_keyfile": str(secure.certs[user].key)}
    if way == "OAUTHBEARER":
        return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
                "sasl_mechanism": way, "sasl_oauth_token_provider": lambda: secure.token(user),
                "ssl_cafile": str(secure.ca)}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": user,
            "sasl_plain_password": _pw(user, wrong), "ssl_cafile": str(secure.ca)}


@pytest.mark.parametrize("way", [*SASL, "mTLS", "OAUTHBEARER"])
def test_samsa_client_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    from samsa import Consumer as SamsaConsumer
    from samsa import Producer as SamsaProducer

    conf = samsa_conf(secure, way)
    topic = app_name("samsa")
    with SamsaProducer(**conf) as producer:
        for value in VALUES:
            producer.send(topic, value)
        producer.flush(20)
    consumer = SamsaConsumer(topic, group_id=app_name("g"), auto_offset_reset="earliest",
                             **conf)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        got += [r.value for r in consumer.poll(500)]
    consumer.commit()
    consumer.close()
    assert got == VALUES


def test_samsa_client_wrong_password_fails_at_once(secure: Secure) -> None:
    from samsa import Producer as SamsaProducer
    from samsa.client.errors import AuthenticationError

    started = time.monotonic()
    with SamsaProducer(**samsa_conf(secure, "SCRAM-SHA-256", wrong=True)) as producer, \
            pytest.raises(AuthenticationError, match="invalid credentials"):
        producer.send(app_name("t"), b"x")
    assert time.monotonic() - started < 20  # not retried until max_block_ms


# -- KAFKA-18813: a regex subscription resolves among the topics the member may describe ----

def test_confluent_kafka_regex_subscription_is_assigned_only_describable_topics(
        secure: Secure, admin: WireClient) -> None:
    """librdkafka in a KIP-848 group (``group.protocol=consumer``) sends the regex to the
    broker, which matches it against the topics alice may DESCRIBE only: a topic she may not
    is neither assigned nor described to her, whoever else may see it."""
    tag = app_name("rx").removeprefix("app-rx-")
    seen, hidden = f"app-rx-{tag}", f"hidden-rx-{tag}"
    for name in (seen, hidden):
        create_topic(admin, name, partitions=2)
        assert produce(admin, name).responses[0].partition_responses[0].error_code == 0
    group = app_name("g")
    c = Consumer({**rdkafka(secure, "SCRAM-SHA-512"), "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "log_level": 3})
    c.subscribe([f"^.*-rx-{tag}"])
    got: set[str] = set()
    try:
        deadline = time.monotonic() + 30
        while len(got) < 1 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.add(m.topic())
        assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
        assert got == {seen}
        assert assignment == {(seen, 0), (seen, 1)}
        described = call(admin, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=[group],
                         include_authorized_operations=False).groups[0]
        (member,) = described.members
        assert member.subscribed_topic_regex == f"(^.*-rx-{tag})"  # librdkafka's grouping
        assert {p for t in member.assignment.topic_partitions for p in t.partitions} == {0, 1}
        assert {t.topic_name for t in member.assignment.topic_partitions} == {seen}
        as_alice = AdminClient(rdkafka(secure, "SCRAM-SHA-512"))  # kept: the future needs it
        by_alice = as_alice.describe_consumer_groups([group])[group].result(10)
        assert {(tp.topic, tp.partition) for m in by_alice.members
                for tp in m.assignment.topic_partitions} == {(seen, 0), (seen, 1)}
        as_bob = AdminClient(rdkafka(secure, "SCRAM-SHA-512", "bob"))
        with pytest.raises(KafkaException) as refused:  # bob may not DESCRIBE the group
            as_bob.describe_consumer_groups([group])[group].result(10)
        assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        del refused, as_alice, as_bob  # the clients go now, not when a cycle is collected
    finally:
        c.close()
