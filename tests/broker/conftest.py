"""Fixtures of the broker tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.wire import WireClient


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> Iterator[WireClient]:
    """A raw-request connection to the session's broker, one per test module."""
    c = WireClient(broker.bootstrap)
    yield c
    c.close()
