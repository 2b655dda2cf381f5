"""Fixtures of the authorization tests: one secured broker per module, and the
administrator's and the subject's connections to it (see :mod:`tests.security.kit`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.brokerproc import BrokerProcess
from tests.security.kit import ADMIN_HOST, SUBJECT_HOST, secured_broker
from tests.wire import WireClient


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = secured_broker(tmp_path_factory.mktemp("authz") / "data").start()
    yield proc
    assert proc.stop() == 0, f"broker did not exit cleanly, see {proc.log_path}"


@pytest.fixture(scope="module")
def admin(secured: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(secured.bootstrap, source=ADMIN_HOST)
    yield c
    c.close()


@pytest.fixture(scope="module")
def subject(secured: BrokerProcess) -> Iterator[WireClient]:
    c = WireClient(secured.bootstrap, source=SUBJECT_HOST)
    yield c
    c.close()
