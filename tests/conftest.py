"""Shared fixtures: real broker processes on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess
from tests.conformance.javakit import JavaKit, compiled
from tests.pg import PostgresServer, unavailable_reason

FAST_GROUPS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by tests that only need topics of their own."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", FAST_GROUPS).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def cp_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker serving KIP-848 consumer groups with short heartbeat and session settings
    (one per test module)."""
    from tests.conformance.consumer_protocol_kit import BROKER_CONFIG

    proc = BrokerProcess(tmp_path_factory.mktemp("cp") / "data", BROKER_CONFIG).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker serving share groups (KIP-932) with short locks and sessions (one per test
    module); its log must hold no traceback."""
    from tests.conformance.sharekit import SHARE_BROKER_CONFIG

    proc = BrokerProcess(tmp_path_factory.mktemp("share") / "data", SHARE_BROKER_CONFIG).start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"
    assert "Traceback" not in proc.log_path.read_text(), f"see {proc.log_path}"


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own (for restarts, crashes and config)."""
    proc = BrokerProcess(tmp_path / "data", FAST_GROUPS)
    yield proc
    proc.kill()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL on a free port of 127.0.0.1 (cluster and Spark node-kill
    tests), stopped and removed afterwards; skips where it cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaKit]:
    """Apache Kafka's Java client drivers (compiled once per session); every JVM a test
    started is gone when it ends. Skips the test when Java cannot be had."""
    kit = compiled(tmp_path_factory)
    yield kit
    kit.stop_all()
