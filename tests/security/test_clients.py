"""Real clients against TLS and SASL listeners: confluent-kafka (librdkafka), kafka-python,
aiokafka, kcat and samsa's own client (the Java client is in test_java_clients.py).

For each client and each way in (SASL_SSL with SCRAM-SHA-256, SCRAM-SHA-512, PLAIN; SSL with
a client certificate; OAUTHBEARER for librdkafka): a permitted principal produces and
consumes in its group; a wrong password is refused; a plaintext client on a TLS listener is
refused; the broker keeps serving the others.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from tests.security.conftest import PASSWORD, Secure

pytestmark = pytest.mark.conformance

SASL = ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- librdkafka (confluent-kafka) -----------------------------------------------------------

def rdkafka(secure: Secure, way: str, password: str = PASSWORD) -> dict[str, Any]:
    ca = {"ssl.ca.location": str(secure.ca)}
    if way == "mTLS":
        return {"bootstrap.servers": secure.address("SSL"), "security.protocol": "SSL", **ca,
                "ssl.certificate.location": str(secure.alice.crt),
                "ssl.key.location": str(secure.alice.key)}
    if way == "OAUTHBEARER":
        return {"bootstrap.servers": secure.address("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER", **ca,
                "oauth_cb": lambda _config: (secure.token(), time.time() + 600)}
    return {"bootstrap.servers": secure.address("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": way, "sasl.username": "alice", "sasl.password": password, **ca}


def rdkafka_round_trip(conf: dict[str, Any], n: int = 20) -> list[bytes]:
    topic, group = _name("rk"), _name("g")
    p = Producer({**conf, "log_level": 3})
    for i in range(n):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(20) == 0
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    return got


@pytest.mark.parametrize("way", [*SASL, "mTLS", "OAUTHBEARER"])
def test_confluent_kafka_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    got = rdkafka_round_trip(rdkafka(secure, way))
    assert got == [f"v{i}".encode() for i in range(20)]


def _rdkafka_refused(conf: dict[str, Any]) -> list[KafkaError]:
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append, "log_level": 0})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2.5)
    admin.poll(0.5)  # serves error_cb
    return errors


@pytest.mark.parametrize("way", SASL)
def test_confluent_kafka_wrong_password_is_refused(secure: Secure, way: str) -> None:
    errors = _rdkafka_refused(rdkafka(secure, way, password="not-the-password"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_confluent_kafka_bad_oauth_token_is_refused(secure: Secure) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    conf = {**rdkafka(secure, "OAUTHBEARER"),
            "oauth_cb": lambda _c: (secure.token(key=forger), time.time() + 600)}
    errors = _rdkafka_refused(conf)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_confluent_kafka_plaintext_client_on_a_tls_listener_is_refused(
        secure: Secure, listener: str) -> None:
    _rdkafka_refused({"bootstrap.servers": secure.address(listener)})
    assert rdkafka_round_trip(rdkafka(secure, "SCRAM-SHA-256"), n=3)  # still serving


def test_certificate_of_another_ca_is_refused(secure: Secure) -> None:
    conf = {**rdkafka(secure, "mTLS"), "ssl.certificate.location": str(secure.stranger.crt),
            "ssl.key.location": str(secure.stranger.key)}
    _rdkafka_refused(conf)
    conf = {**rdkafka(secure, "mTLS")}
    del conf["ssl.certificate.location"], conf["ssl.key.location"]
    _rdkafka_refused(conf)  # no certificate at all: ssl.client.auth=required


# -- kafka-python ---------------------------------------------------------------------------

def kafka_python(secure: Secure, way: str, password: str = PASSWORD) -> dict[str, Any]:
    if way == "mTLS":
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_cafile": str(secure.ca), "ssl_certfile": str(secure.alice.crt),
                "ssl_keyfile": str(secure.alice.key)}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": "alice",
            "sasl_plain_password": password, "ssl_cafile": str(secure.ca)}


@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_kafka_python_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    conf = kafka_python(secure, way)
    topic = _name("kp")
    producer = KafkaProducer(**conf)
    for i in range(10):
        producer.send(topic, f"v{i}".encode())
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=_name("g"), auto_offset_reset="earliest",
                             consumer_timeout_ms=15000, **conf)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 10:
            break
    consumer.commit()
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("way", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_wrong_password_is_refused(secure: Secure, way: str) -> None:
    """kafka-python reports a refused login as a metadata timeout; the broker's log says why."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    before = secure.log.read_text().count(f"mechanism {way}" if way != "PLAIN"
                                          else "Invalid username or password")
    producer = KafkaProducer(**kafka_python(secure, way, password="wrong"),
                             api_version=(3, 0), max_block_ms=3000)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send(_name("t"), b"x").get(5)
    finally:
        producer.close(0)
    after = secure.log.read_text().count(f"mechanism {way}" if way != "PLAIN"
                                         else "Invalid username or password")
    assert after > before


# -- aiokafka -------------------------------------------------------------------------------

def aiokafka(secure: Secure, way: str, password: str = PASSWORD) -> dict[str, Any]:
    from aiokafka.helpers import create_ssl_context

    if way == "mTLS":
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_context": create_ssl_context(cafile=str(secure.ca),
                                                  certfile=str(secure.alice.crt),
                                                  keyfile=str(secure.alice.key))}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": "alice",
            "sasl_plain_password": password,
            "ssl_context": create_ssl_context(cafile=str(secure.ca))}


@pytest.mark.parametrize("way", [*SASL, "mTLS"])
def test_aiokafka_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _name("aio")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**aiokafka(secure, way))
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=_name("g"), auto_offset_reset="earliest",
                                    **aiokafka(secure, way))
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == 10:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [f"v{i}".encode() for i in range(10)]


def test_aiokafka_wrong_password_is_refused(secure: Secure) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioError

    async def run() -> None:
        producer = AIOKafkaProducer(**aiokafka(secure, "SCRAM-SHA-256", password="wrong"),
                                    request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AioError):
        asyncio.run(run())


# -- kcat -----------------------------------------------------------------------------------

def _kcat(*args: str, stdin: str | None = None,
          check: bool = True) -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    return subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True, timeout=60,
                          check=check)


def _kcat_opts(secure: Secure, way: str, password: str = PASSWORD) -> list[str]:
    if way == "mTLS":
        return ["-b", secure.address("SSL"), "-X", "security.protocol=SSL",
                "-X", f"ssl.ca.location={secure.ca}",
                "-X", f"ssl.certificate.location={secure.alice.crt}",
                "-X", f"ssl.key.location={secure.alice.key}"]
    return ["-b", secure.address("SASL_SSL"), "-X", "security.protocol=SASL_SSL",
            "-X", f"sasl.mechanisms={way}", "-X", "sasl.username=alice",
            "-X", f"sasl.password={password}", "-X", f"ssl.ca.location={secure.ca}"]


# Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final message repeats the client
# nonce: Kafka 4 (RFC 5802's nonce equality) refuses it, and so does samsa. Newer librdkafka
# (confluent-kafka above) authenticates with SCRAM.
@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")
@pytest.mark.parametrize("way", ["PLAIN", "mTLS"])
def test_kcat_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    opts = _kcat_opts(secure, way)
    topic = _name("kcat")
    _kcat(*opts, "-P", "-t", topic, stdin="".join(f"v{i}\n" for i in range(10)))
    out = _kcat(*opts, "-G", _name("g"), "-X", "auto.offset.reset=earliest", "-c", "10",
                "-f", "%s\n", topic)
    assert out.stdout.split() == [f"v{i}" for i in range(10)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (make system-deps)")
def test_kcat_wrong_password_is_refused(secure: Secure) -> None:
    done = _kcat(*_kcat_opts(secure, "PLAIN", "wrong"), "-L", "-m", "4", check=False)
    assert done.returncode != 0 and "Authentication failed" in done.stderr


# -- samsa's own client ---------------------------------------------------------------------

def samsa_conf(secure: Secure, way: str, password: str = PASSWORD) -> dict[str, Any]:
    if way == "mTLS":
        return {"bootstrap_servers": secure.address("SSL"), "security_protocol": "SSL",
                "ssl_cafile": str(secure.ca), "ssl_certfile": str(secure.alice.crt),
                "ssl_keyfile": str(secure.alice.key)}
    if way == "OAUTHBEARER":
        return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
                "sasl_mechanism": way, "sasl_oauth_token_provider": secure.token,
                "ssl_cafile": str(secure.ca)}
    return {"bootstrap_servers": secure.address("SASL_SSL"), "security_protocol": "SASL_SSL",
            "sasl_mechanism": way, "sasl_plain_username": "alice",
            "sasl_plain_password": password, "ssl_cafile": str(secure.ca)}


@pytest.mark.parametrize("way", [*SASL, "mTLS", "OAUTHBEARER"])
def test_samsa_client_produces_and_consumes_in_a_group(secure: Secure, way: str) -> None:
    from samsa import Consumer as SamsaConsumer
    from samsa import Producer as SamsaProducer

    conf = samsa_conf(secure, way)
    topic = _name("samsa")
    with SamsaProducer(**conf) as producer:
        for i in range(10):
            producer.send(topic, f"v{i}".encode())
        producer.flush(20)
    consumer = SamsaConsumer(topic, group_id=_name("g"), auto_offset_reset="earliest", **conf)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        got += [r.value for r in consumer.poll(500)]
    consumer.commit()
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(10)]


def test_samsa_client_wrong_password_fails_at_once(secure: Secure) -> None:
    from samsa import Producer as SamsaProducer
    from samsa.client.errors import AuthenticationError

    started = time.monotonic()
    with SamsaProducer(**samsa_conf(secure, "SCRAM-SHA-256", "wrong")) as producer, \
            pytest.raises(AuthenticationError, match="invalid credentials"):
        producer.send(_name("t"), b"x")
    assert time.monotonic() - started < 20  # not retried until max_block_ms
