"""Helpers for client tests against a real broker (the session ``broker`` fixture)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from samsa.client import Admin
from tests.brokerproc import BrokerProcess
from tests.client.proxy import FaultProxy
from tests.client.runner import Runner
from tests.conftest import FAST_GROUPS

_names = itertools.count()
_groups = itertools.count()


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


@pytest.fixture
def group() -> str:
    """A fresh consumer group id."""
    return f"g-{next(_groups)}"


@pytest.fixture
def runners() -> Iterator[list[Runner]]:
    """Runners a test starts; any still running are stopped at the end."""
    started: list[Runner] = []
    yield started
    for r in started:
        if r.is_alive():
            r.stop()


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    """A broker of the test's own that advertises a :class:`FaultProxy` in front of it:
    clients bootstrapped at ``proxy.address`` reach every node through the proxy."""
    proxy = FaultProxy()
    proc = BrokerProcess(tmp_path / "data", {**FAST_GROUPS, "advertised.port": str(proxy.port)})
    proc.start()
    proxy.start(("127.0.0.1", proc.port))
    yield proc, proxy
    proxy.close()
    proc.stop()


@pytest.fixture
def cp_topic(cp_broker: BrokerProcess) -> Callable[[int], str]:
    """Factory: a fresh topic with ``n`` partitions on ``cp_broker``."""

    def make(partitions: int) -> str:
        name = f"cp-{next(_names)}"
        with Admin(bootstrap_servers=cp_broker.bootstrap) as admin:
            admin.create_topics({name: partitions})
        return name

    return make
