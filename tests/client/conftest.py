"""Helpers for client tests against a real broker (the session ``broker`` fixture)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator

import pytest

from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.client.groupproxy import GroupProxy
from tests.client.runner import broker_has_groups
from tests.conftest import FAST_GROUPS

_names = itertools.count()


class ProxiedBroker:
    """A broker behind :class:`GroupProxy`: same interface as :class:`BrokerProcess`."""

    def __init__(self, proc: BrokerProcess, proxy: GroupProxy) -> None:
        self.proc = proc
        self.proxy = proxy
        self.bootstrap = proxy.bootstrap


@pytest.fixture(scope="session")
def broker(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[BrokerProcess | ProxiedBroker]:
    """The shared broker; while it lacks the group APIs, one behind the coordinator proxy."""
    if broker_has_groups(broker.bootstrap):
        yield broker
        return
    proxy = GroupProxy()
    proc = BrokerProcess(tmp_path_factory.mktemp("grouped") / "data",
                         {**FAST_GROUPS, "advertised.port": str(proxy.port)}).start()
    proxy.start(("127.0.0.1", proc.port))
    yield ProxiedBroker(proc, proxy)
    proxy.close()
    assert not proxy.errors, proxy.errors[0]
    assert proc.stop() == 0


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(bootstrap_servers=broker.bootstrap) as a:
        yield a


@pytest.fixture
def topic(admin: Admin, request: pytest.FixtureRequest) -> Callable[[int], str]:
    """Factory: a fresh topic with ``n`` partitions."""

    def make(partitions: int = 1) -> str:
        name = f"{request.node.name[:40]}-{next(_names)}".replace("[", "-").replace("]", "")
        admin.create_topics({name: partitions})
        return name

    return make


def wait_until(cond: Callable[[], bool], timeout: float = 20.0, step: float = 0.05,
               describe: Callable[[], object] | None = None) -> None:
    """Poll ``cond`` until true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            detail = "" if describe is None else f": {describe()}"
            raise AssertionError(f"condition not reached in time{detail}")
        time.sleep(step)
