"""Run the ``samsa`` CLI in-process against the session broker; test-data helpers."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from samsa import TopicPartition
from samsa.cli.main import main
from samsa.client import Admin, Producer
from tests.brokerproc import BrokerProcess


@dataclass
class Run:
    rc: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


CLI = Callable[..., Run]


def parse_table(text: str) -> list[dict[str, str]]:
    """Rows of a printed table (header, a rule line, rows; columns 2+ spaces apart)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and set(lines[i + 1].strip()) == {"─"}:
            header = re.split(r"\s{2,}", line.strip())
            rows = []
            for row in lines[i + 2:]:
                if set(row.strip()) == {"─"}:
                    break
                cells = re.split(r"\s{2,}", row.strip())
                if len(cells) != len(header):
                    break
                rows.append(dict(zip(header, cells, strict=True)))
            return rows
    raise AssertionError(f"no table in:\n{text}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> CLI:
    """``cli("topics", "list")`` runs ``samsa topics list --bootstrap-server <broker>``
    (``bootstrap=False``: no server option; a string: that server)."""

    def run(*argv: str, bootstrap: bool | str = True) -> Run:
        server = broker.bootstrap if bootstrap is True else bootstrap
        args = list(argv) + (["--bootstrap-server", server] if server else [])
        capsys.readouterr()
        try:
            rc = main(args)
        except SystemExit as exc:  # argparse
            rc = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Run(rc, out, err)

    return run


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[Admin]:
    with Admin(broker.bootstrap, request_timeout_ms=10000) as a:
        yield a


def make_topic(admin: Admin, partitions: int, prefix: str = "t") -> str:
    name = unique(prefix)
    admin.create_topics({name: partitions})
    return name


def produce(bootstrap: str, topic: str, counts: dict[int, int],
            timestamps: Callable[[int, int], int] | None = None) -> None:
    """``counts[p]`` records into partition p; ``timestamps(p, i)`` their times (ms)."""
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=0)
    try:
        for p, n in counts.items():
            for i in range(n):
                ts = timestamps(p, i) if timestamps else None
                producer.send(topic, f"v{p}-{i}".encode(), partition=p, timestamp_ms=ts)
        assert producer.flush(20) == 0
    finally:
        producer.close(5)


def commit(admin: Admin, group: str, offsets: dict[tuple[str, int], int]) -> None:
    admin.alter_consumer_group_offsets(group, {TopicPartition(*tp): o
                                              for tp, o in offsets.items()})


class Member:
    """An active confluent-kafka group member (background join and heartbeats)."""

    def __init__(self, bootstrap: str, group: str, topics: list[str],
                 client_id: str = "cli-test-member") -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.consumer.subscribe(topics)
        deadline = time.monotonic() + 30
        while not self.consumer.assignment():
            assert time.monotonic() < deadline, "member was never assigned partitions"
            self.consumer.poll(0.2)

    def commit(self, offsets: dict[tuple[str, int], int]) -> None:
        from confluent_kafka import TopicPartition as CTP

        self.consumer.commit(offsets=[CTP(t, p, o) for (t, p), o in offsets.items()],
                             asynchronous=False)

    def close(self) -> None:
        self.consumer.close()
