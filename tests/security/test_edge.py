"""The broker's edge under bad clients, over real TCP: garbage, truncated and stalled TLS and
SASL handshakes, requests before authentication, idle connections, per-address limits; the
broker keeps serving a well-behaved client throughout. Also the principal of a client
certificate and KIP-368 re-authentication, seen from inside an in-process broker."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from samsa.broker.config import BrokerConfig
from samsa.broker.server import Broker
from samsa.protocol.codec import encode_request
from samsa.security.credentials import FileStore, from_password
from samsa.security.principal import KafkaPrincipal
from samsa.storage.local import LocalEngine
from tests.brokerproc import BrokerProcess
from tests.conftest import FAST_GROUPS
from tests.security.certs import Pki
from tests.security.conftest import PASSWORD, users_add
from tests.wire import WireClient

DEADLINE_MS = 1500


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    pki = Pki(tmp_path_factory.mktemp("edge-pki"))
    pki.issue("broker", server=True)
    pki.issue("alice", ou="eng")
    return pki


@pytest.fixture(scope="module")
def edge(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("edge") / "data"
    users_add(data, "alice", "SCRAM-SHA-256", PASSWORD)
    proc = BrokerProcess(data, {
        **FAST_GROUPS,
        "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,"
                     "PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.location": str(pki.dir / "broker.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "connections.authentication.timeout.ms": str(DEADLINE_MS),
        "connections.max.idle.ms": "2500",
        "connection.failed.authentication.delay.ms": "10",
        "max.connections.per.ip.overrides": "127.0.0.2:2",
    }).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


def _tls(pki: Pki) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    return ctx


def _raw(address: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _serving(edge: BrokerProcess, pki: Pki) -> None:
    """A SASL_SSL client authenticates and gets metadata; a PLAINTEXT one too."""
    from samsa.client import Admin

    with Admin(edge.address("SASL_SSL"), security_protocol="SASL_SSL",
               sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
               sasl_plain_password=PASSWORD, ssl_cafile=str(pki.ca),
               request_timeout_ms=10000) as admin:
        admin.create_topics([f"ok-{random.randrange(1 << 30)}"])
    c = WireClient(edge.address("PLAINTEXT"))
    try:
        c.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
    finally:
        c.close()


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    bytes(random.Random(7).randrange(256) for _ in range(3000)),
    b"\x16\x03\x01\x02\x00" + os.urandom(100),  # a TLS record header, then noise
])
def test_garbage_on_tls_listeners_closes(edge: BrokerProcess, pki: Pki, garbage: bytes) -> None:
    for listener in ("SASL_SSL", "SSL"):
        sock = _raw(edge.address(listener))
        sock.sendall(garbage)
        assert _closed_within(sock, 5)
        sock.close()
    _serving(edge, pki)


def test_stalled_tls_handshakes_are_closed_at_the_deadline(edge: BrokerProcess,
                                                            pki: Pki) -> None:
    """Slow loris: connections that never finish TLS (silent, or a ClientHello cut short)."""
    silent = [_raw(edge.address("SSL")) for _ in range(10)]
    cut = _raw(edge.address("SASL_SSL"))
    cut.sendall(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03")  # truncated ClientHello
    _serving(edge, pki)  # meanwhile
    started = time.monotonic()
    assert all(_closed_within(s, DEADLINE_MS / 1000 + 5) for s in [*silent, cut])
    assert time.monotonic() - started < DEADLINE_MS / 1000 + 5
    for s in [*silent, cut]:
        s.close()


def _frame(api_key: int, version: int, body: Any, correlation: int = 1) -> bytes:
    return encode_request(api_key, version, correlation, "edge-test", body)


def test_requests_before_sasl_authentication_close(edge: BrokerProcess, pki: Pki) -> None:
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=True,
                               include_topic_authorized_operations=False)
    for payload in (
        _frame(3, 12, metadata),  # a request other than ApiVersions / SaslHandshake
        struct.pack(">i", 600_000) + b"\0" * 100,  # above sasl.server.max.receive.size
        struct.pack(">i", 40) + os.urandom(40),  # not a request
        _frame(36, 2, SaslAuthenticateRequest(auth_bytes=b"x")),  # no handshake first
    ):
        sock = _raw(edge.address("SASL_PLAINTEXT"))
        sock.sendall(payload)
        assert _closed_within(sock, 5), payload[:20]
        sock.close()
    _serving(edge, pki)


def test_unknown_mechanism_and_bad_tokens_are_answered_then_closed(edge: BrokerProcess,
                                                                   pki: Pki) -> None:
    c = WireClient(edge.address("SASL_PLAINTEXT"))
    answer = c.call(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
    assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
    assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256"}
    assert c.is_closed()
    c.close()
    rng = random.Random(11)
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        for size in (0, 1, 7, 300):
            c = WireClient(edge.address("SASL_PLAINTEXT"))
            assert c.call(17, 1, SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
            token = bytes(rng.randrange(256) for _ in range(size))
            answer = c.call(36, 2, SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code == ErrorCode.sasl_authentication_failed, (mechanism, token)
            assert answer.error_message
            assert c.is_closed()
            c.close()
    _serving(edge, pki)


def test_a_sasl_slow_loris_is_closed_at_the_deadline(edge: BrokerProcess, pki: Pki) -> None:
    """A client that keeps a SASL exchange alive with a byte now and then is still closed
    when the authentication deadline passes."""
    sock = _raw(edge.address("SASL_PLAINTEXT"))
    sock.sendall(_frame(18, 3, ApiVersionsRequest(client_software_name="x",
                                                  client_software_version="1")))
    handshake = _frame(17, 1, SaslHandshakeRequest(mechanism="PLAIN"), 2)
    started = time.monotonic()
    closed = False
    for byte in handshake[:-1]:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        time.sleep(0.1)
        if time.monotonic() - started > DEADLINE_MS / 1000 + 4:
            break
    assert closed or _closed_within(sock, 3)
    assert time.monotonic() - started < DEADLINE_MS / 1000 + 5
    sock.close()


def test_idle_connections_are_closed(edge: BrokerProcess) -> None:
    c = WireClient(edge.address("PLAINTEXT"))
    c.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
    try:
        assert not c.is_closed(wait=1.0)
        assert c.is_closed(wait=5.0)  # connections.max.idle.ms=2500
    finally:
        c.close()


def test_per_address_limit_leaves_other_addresses_served(edge: BrokerProcess,
                                                         pki: Pki) -> None:
    kept = [_raw(edge.address("PLAINTEXT"), "127.0.0.2") for _ in range(2)]
    extra = _raw(edge.address("PLAINTEXT"), "127.0.0.2")
    assert _closed_within(extra, 5)
    _serving(edge, pki)  # 127.0.0.1 is not limited
    kept[0].close()
    time.sleep(0.3)
    again = _raw(edge.address("PLAINTEXT"), "127.0.0.2")
    again.sendall(_frame(18, 3, ApiVersionsRequest(client_software_name="x",
                                                   client_software_version="1")))
    again.settimeout(5)
    assert len(again.recv(4)) == 4  # answered
    for s in (kept[1], extra, again):
        s.close()


# -- in-process: what the broker made of the connection ------------------------------------

def _in_process(tmp: Path, overrides: dict[str, Any], body: Any) -> Any:
    async def main() -> Any:
        config = BrokerConfig.create(port=0, data_dir=tmp / "data",
                                     overrides={**FAST_GROUPS, **overrides})
        broker = Broker(config, LocalEngine(config))
        await broker.start()
        try:
            return await body(broker)
        finally:
            await broker.stop()

    return asyncio.run(main())


def test_client_certificate_names_the_principal(tmp_path: Path, pki: Pki) -> None:
    """ssl.principal.mapping.rules turn the subject (Java's RFC 2253 form) into the name."""
    overrides = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location":
                 str(pki.dir / "broker.pem"), "ssl.truststore.location": str(pki.ca),
                 "ssl.client.auth": "required",
                 "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/U,DEFAULT"}

    def connect(port: int) -> None:
        ctx = _tls(pki)
        ctx.load_cert_chain(str(pki.dir / "alice.crt"), str(pki.dir / "alice.key"))
        c = WireClient(f"127.0.0.1:{port}", tls=ctx)
        c.call(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
        c.close()

    async def body(broker: Broker) -> list[KafkaPrincipal]:
        seen: list[KafkaPrincipal] = []
        original = broker.dispatch

        async def spy(ctx: Any) -> Any:
            seen.append(ctx.principal)
            assert ctx.listener == "SSL"
            return await original(ctx)

        broker.dispatch = spy  # type: ignore[method-assign]
        await asyncio.to_thread(connect, broker.port)
        return seen

    assert _in_process(tmp_path, overrides, body) == [KafkaPrincipal("User", "ALICE@ENG")]


def test_clients_reauthenticate_on_their_connections(tmp_path: Path) -> None:
    """KIP-368 with samsa's client: sessions of 700 ms, records sent for 3 s: more
    authentications than connections, and every record delivered."""
    store = FileStore(tmp_path / "data")
    asyncio.run(store.alter([("alice", "SCRAM-SHA-512", from_password("SCRAM-SHA-512",
                                                                      PASSWORD))], []))
    overrides = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                 "connections.max.reauth.ms": "700"}

    def produce(port: int) -> int:
        from samsa import Producer

        with Producer(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                      sasl_plain_password=PASSWORD) as producer:
            futures = []
            end = time.monotonic() + 3
            while time.monotonic() < end:
                futures.append(producer.send("reauth", b"x"))
                time.sleep(0.05)
            producer.flush(10)
            return sum(1 for f in futures if f.succeeded())

    async def body(broker: Broker) -> tuple[int, int, int]:
        sent = await asyncio.to_thread(produce, broker.port)
        return sent, broker.metrics.authentications, broker.limits.accepted

    sent, authentications, connections = _in_process(tmp_path, overrides, body)
    assert sent > 30
    assert connections <= 3 and authentications >= connections + 3
